import { createReadStream, createWriteStream, rmSync } from "node:fs";
import { pipeline } from "node:stream/promises";
import { join } from "node:path";
import { withDaemon } from "../lib/daemon.js";
import { download, makeSource, startRawServer, upload, uploadInit, type UploadMode } from "../lib/files-http.js";
import { localRun } from "../lib/process-stream.js";
import { warmUp } from "../lib/warmup.js";
import { cpuSeconds } from "../lib/procfs.js";
import { compared, single } from "../lib/rows.js";
import { median, mibps, timed } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "3-transfer";

/** Writes the first `bytes` of `src` to `dst`. */
async function prefixOf(src: string, dst: string, bytes: number): Promise<void> {
  await pipeline(createReadStream(src, { end: bytes - 1 }), createWriteStream(dst));
}
const TARGET = { text: "≥ 0.8×", met: (r: { ratio: number }) => r.ratio >= 0.8 };

/** Scenario 3: upload and download through /files against a minimal Node server doing the same work, and cp. */
export const transfer: Scenario = {
  id: ID,
  title: "File transfer: /files upload and download (fetch) vs a minimal Node server",
  async run(ctx: BenchContext): Promise<Row[]> {
    const size = ctx.sizeBytes ?? (ctx.quick ? 8 * 2 ** 20 : 2 ** 30);
    const reps = ctx.quick ? 1 : 3;
    const src = await makeSource(join(ctx.tmp, "src.bin"), size);
    const dst = join(ctx.tmp, "dst.bin");
    const raw = await startRawServer();
    try {
      return await withDaemon(async ({ daemon }) => {
        const q = `path=${encodeURIComponent(dst)}`;
        const envdUrl = `${daemon.url}/files?${q}&username=root`;
        const rows: Row[] = [];
        // Repeats stop once a pair has used its time budget (gzip at 1 GiB is slow on 2 cores).
        // Server CPU seconds per GiB moved (from /proc/<pid>/stat) and the client's own, per side:
        // absolute rates drift on a shared machine, the work each process does per byte does not.
        const measure = async (pid: number, fn: () => Promise<unknown>, bytes: number) => {
          const s0 = cpuSeconds(pid);
          const c0 = process.cpuUsage();
          const { ms } = await timed(fn);
          const c = process.cpuUsage(c0);
          const gib = bytes / 2 ** 30;
          return { rate: mibps(bytes, ms), server: (cpuSeconds(pid) - s0) / gib, client: (c.user + c.system) / 1e6 / gib };
        };
        const pair = async (metric: string, envd: () => Promise<unknown>, base: () => Promise<unknown>, bytes = size, target: typeof TARGET | null = TARGET) => {
          const a: number[] = [];
          const b: number[] = [];
          const cpu = { envd: [] as number[], raw: [] as number[], envdClient: [] as number[], rawClient: [] as number[] };
          const t0 = Date.now();
          for (let i = 0; i < reps && (i === 0 || Date.now() - t0 < 45_000); i++) {
            rmSync(dst, { force: true });
            const x = await measure(daemon.pid, envd, bytes);
            rmSync(dst, { force: true });
            const y = await measure(raw.proc.pid!, base, bytes);
            a.push(x.rate);
            b.push(y.rate);
            cpu.envd.push(x.server);
            cpu.raw.push(y.server);
            cpu.envdClient.push(x.client);
            cpu.rawClient.push(y.client);
          }
          const f = (xs: number[]) => median(xs).toFixed(2);
          const cpuNote = `server CPU s/GiB envd ${f(cpu.envd)} vs raw ${f(cpu.raw)}; client ${f(cpu.envdClient)} vs ${f(cpu.rawClient)}`;
          ctx.log(`${metric}: envd ${median(a).toFixed(0)} MiB/s, raw node ${median(b).toFixed(0)} MiB/s; ${cpuNote}`);
          const note = `${(bytes / 2 ** 20).toFixed(0)} MiB, ${a.length} run(s); ${cpuNote}`;
          rows.push(
            compared({ scenario: ID, metric, value: median(a), unit: "MiB/s", baseline: median(b), baselineLabel: "raw Node server", target: target ?? undefined, note }),
          );
        };
        const sizeNote = `${(size / 2 ** 20).toFixed(0)} MiB`;
        // Same job on both sides: 256 KiB file reads for downloads; uploads create a new file
        // (dst is removed before each run) and neither side fsyncs (the daemon's crash safety is
        // its journal plus temp+rename, not fsync), so the baseline does no less disk work.
        for (const mode of ["octet", "multipart", "gzip"] as UploadMode[]) {
          await pair(
            `upload ${mode === "octet" ? "octet-stream" : mode === "gzip" ? "octet-stream + Content-Encoding: gzip" : "multipart/form-data"}`,
            async () => upload(envdUrl, await uploadInit(mode, src), "POST /files"),
            async () => upload(`${raw.url}/up?${q}&mode=${mode}`, await uploadInit(mode, src), "raw upload"),
          );
        }
        const check = (n: number, want: number) => {
          if (n !== want) throw new Error(`download delivered ${n} of ${want} bytes`);
        };
        const fileQ = `path=${encodeURIComponent(src.path)}`;
        await pair(
          "download identity",
          async () => check(await download(`${daemon.url}/files?${fileQ}&username=root`, false, "GET /files"), size),
          async () => check(await download(`${raw.url}/down?${fileQ}&gzip=0`, false, "raw download"), size),
        );
        // Compressing on the fly runs at tens of MiB/s here: a 256 MiB file keeps the run inside its budget.
        const gzSize = Math.min(size, 256 * 2 ** 20);
        const gzFile = gzSize === size ? src.path : join(ctx.tmp, "src-gz.bin");
        if (gzFile !== src.path) await prefixOf(src.path, gzFile, gzSize);
        const gzQ = `path=${encodeURIComponent(gzFile)}`;
        await pair(
          "download Accept-Encoding: gzip",
          async () => check(await download(`${daemon.url}/files?${gzQ}&username=root`, true, "GET /files"), gzSize),
          async () => check(await download(`${raw.url}/down?${gzQ}&gzip=1`, true, "raw download"), gzSize),
          gzSize,
        );
        const cp: number[] = [];
        for (let i = 0; i < reps; i++) {
          rmSync(dst, { force: true });
          cp.push(mibps(size, (await timed(() => localRun("cp", [src.path, dst]))).ms));
        }
        // Reference, no target: the rows above meet a freshly started daemon. One that has served
        // every service holds a bigger V8 heap (~10-11 MB live); above V8's 8 MB activation
        // threshold, every ~32 MiB of Buffers an upload allocates ends in a full mark-compact,
        // which a raw server with a ~4 MB heap never pays (same bytes allocated on both sides).
        await warmUp(daemon.url, ctx.tmp, ctx.quick);
        await pair(
          "upload octet-stream after a warm-up workload (reference)",
          async () => upload(envdUrl, await uploadInit("octet", src), "POST /files"),
          async () => upload(`${raw.url}/up?${q}&mode=octet`, await uploadInit("octet", src), "raw upload"),
          size,
          null,
        );
        rows.push(single(ID, "cp of the same file (reference)", median(cp), "MiB/s", undefined, `${sizeNote}; gzip uploads send a level-1 gzip of the file; no side fsyncs`));
        return rows;
      });
    } finally {
      await raw.stop();
    }
  },
};

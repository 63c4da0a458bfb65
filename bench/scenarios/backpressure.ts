import { rmSync } from "node:fs";
import { join } from "node:path";
import { withDaemon } from "../lib/daemon.js";
import { makeSource } from "../lib/files-http.js";
import { peakGrowth } from "../lib/procfs.js";
import { startToEnd } from "../lib/process-stream.js";
import { single } from "../lib/rows.js";
import { slowDownload, slowUpload, stalledStream, type Stalled } from "../lib/slow-http.js";
import { mib, mibps, now } from "../lib/stats.js";
import { benchTransports } from "../lib/transports.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "8-backpressure";
const TARGET_MIB = 64;

function growthRow(metric: string, bytes: number, note?: string): Row {
  return single(ID, metric, mib(bytes), "MiB", { text: `≤ ${TARGET_MIB} MiB`, met: mib(bytes) <= TARGET_MIB }, note);
}

/** Scenario 8: daemon RSS growth under slow clients and beside a stalled stream subscriber. */
export const backpressure: Scenario = {
  id: ID,
  title: "Backpressure: daemon RSS growth with slow and stalled clients",
  async run(ctx: BenchContext): Promise<Row[]> {
    const size = ctx.sizeBytes ?? (ctx.quick ? 32 * 2 ** 20 : 2 ** 30);
    const pace = { rate: 32 * 2 ** 20, slowMs: ctx.quick ? 500 : 10_000 };
    const paceNote = `${mib(size).toFixed(0)} MiB; first ${pace.slowMs / 1000} s at ${mib(pace.rate)} MiB/s, then full speed`;
    const src = (await makeSource(join(ctx.tmp, "src.bin"), size)).path;
    rmSync(src + ".gz", { force: true });
    return withDaemon(async ({ daemon }) => {
      const rows: Row[] = [];
      const files = (p: string) => `${daemon.url}/files?path=${encodeURIComponent(p)}&username=root`;

      const down = await peakGrowth(daemon.pid, () => slowDownload(files(src), pace));
      if (down.value !== size) throw new Error(`slow download got ${down.value} of ${size} bytes`);
      rows.push(growthRow("slow client downloads (GET /files)", down.growth, paceNote));
      ctx.log(`slow download: +${mib(down.growth).toFixed(1)} MiB`);

      const dst = join(ctx.tmp, "up.bin");
      const up = await peakGrowth(daemon.pid, () => slowUpload(files(dst), size, pace));
      rows.push(growthRow("slow client uploads (POST /files)", up.growth, paceNote));
      ctx.log(`slow upload: +${mib(up.growth).toFixed(1)} MiB`);
      rmSync(dst, { force: true });

      // A fast writer with two subscribers: the Start stream reads everything, a Connect
      // subscriber over HTTP/1.1 never reads. The output starts after 1 s so Connect is in place.
      const t = benchTransports(daemon.url);
      let stalled: Stalled | undefined;
      let liveMs = 0;
      const fan = await peakGrowth(daemon.pid, async () => {
        const t0 = now();
        const live = await startToEnd(t.proc.binary, "/bin/sh", ["-c", `sleep 1; exec head -c ${size} /dev/zero`], {
          onStart: (pid) => {
            void stalledStream(daemon.url, "/process.Process/Connect", { process: { pid } }).then((s) => (stalled = s));
          },
        });
        liveMs = now() - t0 - 1000;
        return live;
      });
      const end = stalled ? await Promise.race([stalled.finish(), new Promise<string>((r) => setTimeout(() => r("(still open)"), 10_000))]) : "(never connected)";
      stalled?.abort();
      const complete = fan.value.bytes === size;
      rows.push(
        growthRow(
          "stalled Connect subscriber beside a live Start stream",
          fan.growth,
          `live stream got ${complete ? "all" : `${fan.value.bytes} of`} ${mib(size).toFixed(0)} MiB at ${mibps(fan.value.bytes, liveMs).toFixed(0)} MiB/s; stalled stream ended with ${end.slice(0, 160) || "(no end message)"}`,
        ),
      );
      if (!complete) rows.push(single(ID, "live subscriber received all output", 0, "", { text: "yes", met: false }));
      return rows;
    });
  },
};

import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { daemonArgs, ENVD_BIN, ROOT, withDaemon } from "../lib/daemon.js";
import { anonymous, burst, memoryAfter } from "../lib/burst.js";
import { localRun, startToEnd } from "../lib/process-stream.js";
import { memStatus } from "../lib/procfs.js";
import { compared, single } from "../lib/rows.js";
import { median, mib, now, sleep } from "../lib/stats.js";
import { bareNodeArgs, freePort, timeToHealthy } from "../lib/startup.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";
import { benchTransports } from "../lib/transports.js";
import { warmUp } from "../lib/warmup.js";

const ID = "6-footprint";

interface Sample {
  ms: number;
  rss: number;
}

/** A program the scenario starts. */
interface Kind {
  label: string;
  file: string;
  args: (port: number) => string[];
  /** An envd: also timed to its first command. */
  envd: boolean;
}

/** Starts a program until healthy, waits `settleMs`, reads its RSS, stops it. */
async function sample(k: Kind, settleMs: number): Promise<Sample> {
  const port = await freePort();
  const s = await timeToHealthy(k.file, k.args(port), port);
  try {
    await sleep(settleMs);
    return { ms: s.ms, rss: memStatus(s.proc.pid!).rss };
  } finally {
    await s.stop();
  }
}

/** ms from exec to the end of the first Process.Start (an echo, Connect JSON as the e2b SDK sends it), issued at the first 204. */
async function firstCommand(k: Kind): Promise<number> {
  const port = await freePort();
  const s = await timeToHealthy(k.file, k.args(port), port);
  try {
    const client = benchTransports(`http://127.0.0.1:${port}`).proc.json;
    const out = await startToEnd(client, "/bin/echo", ["first"]);
    if (out.exitCode !== 0) throw new Error(`${k.label}: the first command ended with ${out.exitCode}`);
    return now() - s.spawnedAt;
  } finally {
    await s.stop();
  }
}

/** The SEA executable from dist/envd-*.tar.gz, unpacked under `tmp`; undefined when not built. */
async function seaBinary(tmp: string): Promise<string | undefined> {
  const tarball = readdirSync(join(ROOT, "dist")).find((f) => /^envd-.*\.tar\.gz$/.test(f));
  if (!tarball) return undefined;
  const dir = join(tmp, "sea");
  mkdirSync(dir);
  await localRun("tar", ["-xzf", join(ROOT, "dist", tarball), "-C", dir]);
  for (const sub of readdirSync(dir)) if (existsSync(join(dir, sub, "envd"))) return join(dir, sub, "envd");
  return undefined;
}

/** Scenario 6: idle RSS and exec → first 204 from /health, against a bare node answering /health. */
export const footprint: Scenario = {
  id: ID,
  title: "Footprint: idle RSS and start time vs bare node",
  async run(ctx: BenchContext): Promise<Row[]> {
    const reps = ctx.quick ? 1 : 7;
    const settle = ctx.quick ? 200 : 1500;
    const scratch = mkdtempSync(join(ctx.tmp, "envd-"));
    const sea = await seaBinary(ctx.tmp);
    const envd = (p: number) => daemonArgs(p, scratch);
    const kinds: Kind[] = [
      { label: "bare node", file: process.execPath, args: bareNodeArgs, envd: false },
      { label: "envd (node dist/envd)", file: ENVD_BIN, args: envd, envd: true },
    ];
    if (sea) kinds.push({ label: "envd SEA executable", file: sea, args: envd, envd: true });
    const samples = new Map<string, Sample[]>(kinds.map((k) => [k.label, []]));
    const firsts = new Map<string, number[]>(kinds.map((k) => [k.label, []]));
    const nodeExit: number[] = [];
    for (let i = 0; i < reps; i++) {
      for (const k of i % 2 ? [...kinds].reverse() : kinds) {
        samples.get(k.label)!.push(await sample(k, settle));
        if (k.envd) firsts.get(k.label)!.push(await firstCommand(k));
      }
      const t0 = now();
      await localRun(process.execPath, ["-e", "0"]);
      nodeExit.push(now() - t0);
    }
    rmSync(scratch, { recursive: true, force: true });
    const bare = samples.get("bare node")!;
    const bareMs = median(bare.map((s) => s.ms));
    const bareRss = mib(median(bare.map((s) => s.rss)));
    const rows: Row[] = [];
    for (const k of kinds.slice(1)) {
      const xs = samples.get(k.label)!;
      ctx.log(`${k.label}: ${median(xs.map((s) => s.ms)).toFixed(0)} ms, ${mib(median(xs.map((s) => s.rss))).toFixed(1)} MiB`);
      rows.push(
        compared({ scenario: ID, metric: `${k.label}: idle RSS after start`, value: mib(median(xs.map((s) => s.rss))), unit: "MiB", baseline: bareRss, baselineLabel: "bare node /health server", target: { text: "≤ bare + 5 MiB", met: (r) => r.value - r.baseline <= 5 } }),
        compared({ scenario: ID, metric: `${k.label}: exec → first 204 from /health`, value: median(xs.map((s) => s.ms)), unit: "ms", baseline: bareMs, baselineLabel: "bare node /health server", target: { text: "≤ bare + 30 ms", met: (r) => r.value - r.baseline <= 30 } }),
        compared({ scenario: ID, metric: `${k.label}: exec → first command answered (Process.Start of echo, to its end)`, value: median(firsts.get(k.label)!), unit: "ms", baseline: bareMs, baselineLabel: "bare node: exec → first 204" }),
      );
    }
    rows.push(single(ID, "bare `node -e 0` exec → exit (reference)", median(nodeExit), "ms"));
    if (!sea) rows.push(single(ID, "envd SEA executable", NaN, "", undefined, "dist/envd-*.tar.gz not built (./build.sh --artifact): not measured"));

    // Idle again after a warm-up workload touching every service. Read 3 s after the workload
    // (after 2 quiet seconds envd runs a memory-reducing GC and hands freed C-heap pages back),
    // and again at 15 s.
    const [warm, late] = await withDaemon(async ({ daemon }) => {
      await warmUp(daemon.url, ctx.tmp, ctx.quick);
      await sleep(ctx.quick ? 500 : 3000);
      const early = memStatus(daemon.pid);
      await sleep(ctx.quick ? 0 : 12_000);
      return [early, memStatus(daemon.pid)] as const;
    });
    rows.push(
      compared({ scenario: ID, metric: "envd: idle RSS after a warm-up workload", value: mib(warm.rss), unit: "MiB", baseline: bareRss, baselineLabel: "bare node /health server", note: `peak RSS during warm-up (VmHWM) ${mib(warm.hwm).toFixed(1)} MiB` }),
    );
    if (!ctx.quick) {
      rows.push(compared({ scenario: ID, metric: "envd: idle RSS 15 s after a warm-up workload", value: mib(late.rss), unit: "MiB", baseline: bareRss, baselineLabel: "bare node /health server" }));
    }
    rows.push(await burstRow(ctx));
    return rows;
  },
};

/** The footprint target's burst: RSS within 10 MiB of the same daemon's idle RSS 30 s after it. */
async function burstRow(ctx: BenchContext): Promise<Row> {
  const load = ctx.quick ? { commands: 20, downloadMiB: 16, watchers: 3 } : { commands: 100, downloadMiB: 256, watchers: 10 };
  const r = await withDaemon(async ({ daemon }) => {
    await sleep(1500);
    const idle = { rss: mib(memStatus(daemon.pid).rss), anon: mib(anonymous(daemon.pid)) };
    await burst(daemon.url, ctx.tmp, load);
    const peak = mib(memStatus(daemon.pid).hwm);
    return { idle, peak, points: await memoryAfter(daemon.pid, now(), ctx.quick ? [3] : [3, 15, 30]) };
  });
  const last = r.points[r.points.length - 1];
  const at = r.points.map((p) => `${p.s} s: ${p.rss.toFixed(1)}`).join(", ");
  return compared({
    scenario: ID,
    metric: `envd: RSS ${last.s} s after a burst (${load.commands} commands, a ${load.downloadMiB} MiB download, ${load.watchers} watchers)`,
    value: last.rss,
    unit: "MiB",
    baseline: r.idle.rss,
    baselineLabel: "the same daemon idle before it",
    target: { text: "≤ idle + 10 MiB", met: (x) => x.value - x.baseline <= 10 },
    note: `RSS ${at} MiB, peak ${r.peak.toFixed(1)}; anonymous (private, not file-backed) ${last.anon.toFixed(1)} MiB against ${r.idle.anon.toFixed(1)} idle: the rest is the node binary's code and data paged in by the burst, shared by every envd on the host`,
  });
}

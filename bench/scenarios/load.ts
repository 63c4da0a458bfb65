import type { Client } from "@connectrpc/connect";
import { mkdirSync, writeFileSync } from "node:fs";
import { setMaxListeners } from "node:events";
import { cpus } from "node:os";
import { join } from "node:path";
import type { Filesystem } from "../../src/envd/gen/filesystem/filesystem_pb.js";
import { probe } from "../lib/available.js";
import { withDaemon } from "../lib/daemon.js";
import { UNIT_NICE } from "../../test/envd/helpers/daemon.js";
import { cpuSeconds, machineCpu, peakGrowth, stealShare } from "../lib/procfs.js";
import { startToEnd } from "../lib/process-stream.js";
import { leanStart } from "../lib/connect-reader.js";
import { leanWatch } from "../lib/lean-watch.js";
import { compared, single } from "../lib/rows.js";
import { mib, percentile, sleep } from "../lib/stats.js";
import { startStatServer } from "../lib/stat-server.js";
import { epochNow, StatSampler, type StatSamples } from "../lib/stat-sampler.js";
import { benchTransports } from "../lib/transports.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "7-load";
const LINE = "x".repeat(63);

/**
 * Samples Stat latency (ms) back to back, `gapMs` apart, until `stop` aborts; counts errors.
 * Runs on the calling thread: under load its own event-loop lag is counted too (see StatSampler).
 */
async function sampleStat(client: Client<typeof Filesystem>, path: string, gapMs: number, stop: AbortSignal): Promise<StatSamples> {
  const ms: number[] = [];
  const at: number[] = [];
  const errors: string[] = [];
  while (!stop.aborted) {
    const t0 = epochNow();
    try {
      await client.stat({ path });
      ms.push(epochNow() - t0);
      at.push(t0);
    } catch (err) {
      errors.push((err as Error).message);
    }
    await sleep(gapMs);
  }
  return { ms, at, errors };
}

/** Latencies of the samples issued after `t` (epoch ms, see epochNow). */
function after(s: { ms: number[]; at: number[] }, t: number): number[] {
  return s.ms.filter((_, i) => s.at[i] >= t);
}

/** The load: how many commands and watchers, for how long, and the directory watched and Stat'ed. */
interface LoadShape {
  commands: number;
  watchers: number;
  seconds: number;
  dir: string;
  quick: boolean;
  /**
   * Lean clients (hand-made Connect requests, frames split and decoded by the bench itself)
   * for the commands, watchers and samplers, instead of connect-node's: on a sandbox the
   * clients are remote, and here connect-node's clients alone use more CPU than the daemon.
   */
  lean: boolean;
  /** The samplers' threads' nice value (see StatSampler); unset: the bench's own. */
  samplerNice?: number;
}

/** Where the samplers send their Stats: h2c (binary) and HTTP/1.1 (JSON). */
interface StatTarget {
  url: string;
  http1Url: string;
}

/** What one server did under the load. */
interface LoadOutcome {
  /** Stat latencies on the idle server, both samplers running (as under load): binary, JSON. */
  idle: { bin: number[]; json: number[] };
  /** Share of the machine's CPU time stolen by the hypervisor while idle latency was sampled, and under load. */
  steal: { idle: number; load: number };
  bin: StatSamples;
  json: StatSamples;
  same: StatSamples;
  errors: string[];
  cpu: number;
  growth: number;
  ownCpu: number;
  machineBusy: number;
  allStarted: number;
  burstStart: number;
}

/**
 * Runs the load against the server at `url` (process `pid`): idle Stat first, then `commands`
 * streaming commands (one 64-byte line every 50 ms each, in a single perl process: no fork per
 * line) and `watchers` recursive watchers on a churning directory, while Stat is sampled.
 */
async function underLoad(url: string, http1Url: string, pid: number, shape: LoadShape, statAt: StatTarget = { url, http1Url }): Promise<LoadOutcome> {
  const { commands, watchers, seconds, dir, quick, lean, samplerNice } = shape;
  const lines = seconds * 20;
  const script = `$|=1; for (1..${lines}) { print "${LINE}\\n"; select(undef,undef,undef,0.05) }`;
  const t = benchTransports(url, http1Url);
  await probe("Filesystem.Stat", () => t.fs.binary.stat({ path: dir }));
  // The samplers run on their own threads: this thread drives hundreds of streams, and its
  // event-loop lag must not be counted as server latency.
  const sampler = (codec: "binary" | "json") => new StatSampler({ url: statAt.url, http1Url: statAt.http1Url, path: dir, codec, gapMs: 5, lean, nice: samplerNice });

  // Idle latency first: the same two samplers on the quiet server are the baseline (after a
  // second of warm-up: the first calls compile code and load modules on both sides).
  const idleSamplers = [sampler("binary"), sampler("json")];
  const idleCpu0 = machineCpu();
  await Promise.all(idleSamplers.map((s) => s.started()));
  const warm = epochNow() + (quick ? 200 : 1000);
  await sleep(quick ? 700 : 4000);
  const [idleBin, idleJson] = (await Promise.all(idleSamplers.map((s) => s.stop()))).map((s) => ({ ms: after(s, warm) }));
  const idleSteal = stealShare(idleCpu0, machineCpu());

  const errors: string[] = [];
  const stop = new AbortController();
  // Every lean watcher's request listens to it.
  setMaxListeners(0, stop.signal);
  let allStarted = Infinity;
  const samplers = { bin: sampler("binary"), json: sampler("json") };
  await Promise.all([samplers.bin.started(), samplers.json.started()]);
  const burstStart = epochNow();
  // The old method, for comparison: a sampler sharing this (busy) thread's event loop.
  const sameThread = lean ? Promise.resolve({ ms: [], at: [], errors: [] }) : sampleStat(benchTransports(url, http1Url).fs.binary, dir, 5, stop.signal);
  const cpu0 = cpuSeconds(pid);
  const machine0 = machineCpu();
  const own0 = process.cpuUsage();
  const { growth, value } = await peakGrowth(pid, async () => {
    const watches = Array.from({ length: watchers }, (_, i) =>
      lean ? leanWatch(http1Url, dir, i % 2 === 0, stop.signal).catch((err: Error) => (errors.push(`watch: ${err.message}`), 0)) : (async () => {
        const c = i % 2 ? t.fs.json : t.fs.binary;
        let events = 0;
        try {
          for await (const res of c.watchDir({ path: dir, recursive: true }, { signal: stop.signal })) {
            if (res.event.case === "filesystem") events++;
          }
        } catch (err) {
          if (!stop.signal.aborted) errors.push(`watch: ${(err as Error).message}`);
        }
        return events;
      })(),
    );
    const churn = (async () => {
      for (let i = 0; !stop.signal.aborted; i++) {
        writeFileSync(join(dir, `c${i % 50}`), String(i));
        await sleep(20);
      }
    })();
    let started = 0;
    const onStart = (): void => {
      if (++started === commands) allStarted = epochNow();
    };
    await Promise.all(
      Array.from({ length: commands }, (_, i) =>
        (lean ? leanStart(http1Url, "/usr/bin/perl", ["-e", script], i % 2 === 0, onStart) : startToEnd(i % 2 ? t.proc.json : t.proc.binary, "/usr/bin/perl", ["-e", script], { onStart })).then(
          (r) => {
            if (r.exitCode !== 0 || r.bytes !== lines * 64) errors.push(`command ${i}: exit ${r.exitCode}, ${r.bytes} of ${lines * 64} bytes`);
          },
          (err: Error) => errors.push(`command ${i}: ${err.message}`),
        ),
      ),
    );
    stop.abort();
    const [bin, json] = await Promise.all([samplers.bin.stop(), samplers.json.stop()]);
    const [watched, same] = await Promise.all([Promise.all(watches), sameThread, churn]);
    return { bin, json, watched, same };
  });
  const cpu = cpuSeconds(pid) - cpu0;
  const machine1 = machineCpu();
  const own = process.cpuUsage(own0);
  errors.push(...[value.bin, value.json, value.same].flatMap((s) => s.errors.map((e) => `stat: ${e}`)));
  const silentWatchers = value.watched.filter((n) => n === 0).length;
  if (silentWatchers) errors.push(`${silentWatchers} watcher(s) received no events`);
  return {
    idle: { bin: idleBin.ms, json: idleJson.ms },
    steal: { idle: idleSteal, load: stealShare(machine0, machine1) },
    bin: value.bin,
    json: value.json,
    same: value.same,
    errors,
    cpu,
    growth,
    ownCpu: (own.user + own.system) / 1e6,
    machineBusy: (machine1.busy - machine0.busy) / (machine1.total - machine0.total),
    allStarted,
    burstStart,
  };
}

/**
 * The floor: the same load on envd (lean clients, unit priorities), its Stats sent instead to a
 * bare Node Stat server beside it at the unit's priority (see stat-server.ts). What this machine
 * gives any Node server answering Stat there, whatever that server's own work.
 */
async function floorRows(s: LoadShape, ctx: BenchContext): Promise<Row[]> {
  mkdirSync(s.dir);
  const server = await startStatServer();
  let floor: LoadOutcome;
  try {
    floor = await withDaemon(({ daemon }) => underLoad(daemon.url, daemon.url, daemon.pid, s, server), { unitPriorities: true });
  } finally {
    await server.stop();
  }
  ctx.log(`floor: errors ${floor.errors.length}; stat samples ${floor.bin.ms.length}+${floor.json.ms.length}`);
  const rows = statRows(floor, s.commands, "bare Node Stat server beside envd under the same load (floor, reference)", false, "idle bare server");
  const note = `${(floor.steal.load * 100).toFixed(1)} % of CPU time stolen by the hypervisor during this load${floor.errors.length ? `; errors: ${floor.errors.slice(0, 3).join("; ")}` : ""}`;
  return rows.map((r) => ({ ...r, note: `${r.note}; ${note}` }));
}

/** Stat p99 rows (whole run and steady state) of one server under the load. */
function statRows(o: LoadOutcome, commands: number, clients: string, withTarget: boolean, idleServer = "idle daemon"): Row[] {
  const rows: Row[] = [];
  for (const [transport, s, idle] of [
    ["binary h2c", o.bin, o.idle.bin],
    ["JSON HTTP/1.1", o.json, o.idle.json],
  ] as const) {
    const idleP99 = percentile(idle, 99);
    const idleLabel = `${idleServer}, same samplers, ${transport.split(" ")[0]}`;
    const codec = `${transport}, ${clients}`;
    const steady = after(s, o.allStarted);
    rows.push(
      compared({
        scenario: ID,
        metric: `Stat p99 under load, ${codec}`,
        value: percentile(s.ms, 99),
        unit: "ms",
        baseline: idleP99,
        baselineLabel: idleLabel,
        target: withTarget ? { text: "≤ 20 ms", met: (r) => r.value <= 20 } : undefined,
        note: `${s.ms.length} samples; p50 ${percentile(s.ms, 50).toFixed(1)} ms`,
      }),
      compared({
        scenario: ID,
        metric: `Stat p99 once all commands run (steady state), ${codec}`,
        value: percentile(steady, 99),
        unit: "ms",
        baseline: idleP99,
        baselineLabel: idleLabel,
        note: `${steady.length} samples; the ${commands} Starts took ${((o.allStarted - o.burstStart) / 1000).toFixed(1)} s to all report start`,
      }),
    );
  }
  return rows;
}

/** Scenario 7: many streaming commands and watchers at once while Stat latency is sampled. */
export const load: Scenario = {
  id: ID,
  title: "Load: concurrent streaming commands and watchers, Stat latency",
  async run(ctx: BenchContext): Promise<Row[]> {
    const shape = (lean: boolean, name: string, samplerNice?: number): LoadShape => ({
      commands: ctx.quick ? 20 : 200,
      watchers: ctx.quick ? 5 : 50,
      seconds: ctx.quick ? 2 : 10,
      dir: join(ctx.tmp, `watched-${name}`),
      quick: ctx.quick,
      lean,
      samplerNice,
    });
    // The target rows: the daemon as its systemd unit runs it (Nice=-20, realtime IO; the
    // commands it starts are reset to nice 0) and the load's clients lean, as remote clients
    // cost the sandbox nothing. The Stat samplers stand for remote callers too: their threads run
    // at the daemon's priority, so that their own waits for a CPU on this machine (which a remote
    // caller does not have) are not counted as the daemon's latency. Then a floor (floorRows).
    // Then, for reference and comparison with earlier runs: the daemon and its samplers at nice 0
    // like the commands, with connect-node's clients on this machine's cores.
    const rows: Row[] = [];
    for (const [lean, unit, clients] of [
      [true, true, "lean clients, unit priorities for envd and samplers"],
      [false, false, "connect-node clients, envd at nice 0"],
    ] as const) {
      const s = shape(lean, `${lean ? "lean" : "connect-node"}-${unit ? "unit" : "nice0"}`, unit ? UNIT_NICE : undefined);
      mkdirSync(s.dir);
      const envd = await withDaemon(({ daemon }) => underLoad(daemon.url, daemon.url, daemon.pid, s), { unitPriorities: unit });
      ctx.log(`${clients}: errors ${envd.errors.length}; stat samples ${envd.bin.ms.length}+${envd.json.ms.length}; daemon CPU ${envd.cpu.toFixed(1)} s`);
      const note = `${s.commands} commands × ${s.seconds * 20} lines over ${s.seconds} s, ${s.watchers} watchers; daemon CPU ${envd.cpu.toFixed(1)} s, peak RSS growth ${mib(envd.growth).toFixed(0)} MiB`;
      rows.push(
        single(ID, `errors (streams, watchers, Stat), ${clients}`, envd.errors.length, "", { text: "0", met: envd.errors.length === 0 }, envd.errors.length ? envd.errors.slice(0, 3).join("; ") : note),
        compared({ scenario: ID, metric: `Stat p50 under load, binary h2c, ${clients}`, value: percentile(envd.bin.ms, 50), unit: "ms", baseline: percentile(envd.idle.bin, 50), baselineLabel: "idle daemon, same samplers, binary" }),
        ...statRows(envd, s.commands, clients, lean && unit),
        // Why p99 is what it is: how busy the whole machine was. A saturated machine queues the
        // server's thread behind the load generator and the commands.
        single(ID, `machine CPU busy during the load, ${clients} (reference)`, envd.machineBusy * 100, "%", undefined,
          `all ${cpus().length} cores; daemon ${envd.cpu.toFixed(1)} s CPU, this bench process (the clients of ${s.commands} streams, ${s.watchers} watchers and the samplers) ${envd.ownCpu.toFixed(1)} s; the rest is the ${s.commands} commands and the kernel`),
        // How noisy the VM was: a vCPU the hypervisor gives to another guest runs nothing of ours,
        // and any request then waiting on it (a Stat, or its sampler) waits too.
        single(ID, `CPU time stolen by the hypervisor during the load, ${clients} (reference)`, envd.steal.load * 100, "%", undefined,
          `${(envd.steal.idle * 100).toFixed(1)} % while the idle baseline was sampled`),
      );
      if (!lean && !unit) {
        rows.push(
          compared({
            scenario: ID,
            metric: "Stat p99 under load, binary h2c, sampled from the load's own thread (old method, reference)",
            value: percentile(envd.same.ms, 99),
            unit: "ms",
            baseline: percentile(envd.idle.bin, 99),
            baselineLabel: "idle daemon, same samplers, binary",
            note: `${envd.same.ms.length} samples; counts the bench's own event-loop lag behind ${s.commands} streams and ${s.watchers} watchers`,
          }),
        );
      }
      if (lean && unit) rows.push(...(await floorRows(shape(lean, "lean-unit-floor", UNIT_NICE), ctx)));
    }
    return rows;
  },
};

/**
 * Scenario 18: sandboxd's own footprint under churn. One SDK client runs rounds of the published
 * SDK's Sandbox.create() → commands.run('true') → kill against a real sandboxd, one sandbox at a
 * time; sandboxd's RSS, V8 heap in use and live heap (in use right after its last full
 * collection), all from its /metrics, are read after a warm-up, after the rounds, and after a
 * minute idle. A service that makes thousands of sandboxes a day has to come back to its level:
 * the idle figures are compared with the warmed-up ones. BENCH_CHURN_ROUNDS sets the rounds
 * (default 1,000) for a shorter run on a busy machine.
 */
import { readFileSync } from "node:fs";
import { call, startSandboxd, type Sandboxd } from "../../test/sandboxd/helpers/sandboxd.js";
import { needSandboxes } from "../lib/available.js";
import { compared, single } from "../lib/rows.js";
import { sdkRun } from "../lib/sdk-run.js";
import { sleep } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "18-churn";

/** Rounds of create → commands.run('true') → kill in one SDK process; prints how many failed. */
const SDK_CHURN = `
const { Sandbox } = await import("e2b");
const n = Number(process.argv[1]);
let failed = 0;
for (let i = 0; i < n; i++) {
  try {
    const sbx = await Sandbox.create();
    const r = await sbx.commands.run("true");
    if (r.exitCode !== 0) failed++;
    await sbx.kill();
  } catch (err) {
    failed++;
    console.error(String(err));
  }
}
console.log(JSON.stringify(failed));
`;

/** The warm pool's size (sandboxd's default). */
const POOL = 2;
/** How long sandboxd is left alone before the last reading. */
const IDLE_MS = 60_000;
/** Readings taken a second apart at each point; the lowest heap of them is kept (a collection may be due). */
const READINGS = 5;

/** sandboxd's RSS, V8 heap in use and heap after its last full collection, MiB, as its /metrics reports them. */
interface Footprint {
  rss: number;
  heap: number;
  /** NaN before sandboxd's first full collection. */
  live: number;
}

/** One reading of sandboxd's /metrics: its RSS, heap in use and live heap. */
async function reading(s: Sandboxd): Promise<Footprint> {
  const res = await call(s.port, readFileSync(s.caFile), "api.e2b.localhost", "/metrics", { headers: { "x-api-key": s.apiKey } });
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}: ${res.body.slice(0, 200)}`);
  const gauge = (name: string, optional = false) => {
    const m = new RegExp(`^${name} (\\d+(?:\\.\\d+)?(?:e\\+\\d+)?)$`, "m").exec(res.body);
    if (!m && !optional) throw new Error(`sandboxd's /metrics has no ${name}`);
    return m ? Number(m[1]) / 2 ** 20 : NaN;
  };
  return { rss: gauge("sandboxd_process_resident_memory_bytes"), heap: gauge("sandboxd_process_heap_used_bytes"), live: gauge("sandboxd_process_heap_live_bytes", true) };
}

/** `READINGS` readings a second apart: the last RSS and live heap, the lowest heap in use. */
async function footprint(s: Sandboxd): Promise<Footprint> {
  let last: Footprint | undefined;
  let heap = Infinity;
  for (let i = 0; i < READINGS; i++) {
    if (i > 0) await sleep(1000);
    last = await reading(s);
    heap = Math.min(heap, last.heap);
  }
  return { ...last!, heap };
}

/** Share of rounds that may fail (an overloaded machine times a few out) before the run counts as broken. */
const MAY_FAIL = 0.05;

/** Runs `n` rounds through the SDK; answers how many failed, throws when more than MAY_FAIL of them did. */
async function churn(s: Sandboxd, n: number): Promise<number> {
  const failed = await sdkRun<number>(SDK_CHURN, [n], s.sdkEnv);
  if (failed > n * MAY_FAIL) throw new Error(`${failed} of ${n} rounds failed`);
  return failed;
}

/** Scenario 18: RSS and heap of sandboxd before, after N rounds of churn, and after a minute idle. */
export const churnFootprint: Scenario = {
  id: ID,
  title: "sandboxd: its RSS and V8 heap under churn (SDK create → commands.run('true') → kill, one at a time, warm pool of 2) and after a minute idle",
  async run(ctx: BenchContext): Promise<Row[]> {
    needSandboxes(ctx);
    const n = ctx.quick ? 20 : Number(process.env.BENCH_CHURN_ROUNDS ?? 1000);
    const warmup = ctx.quick ? 3 : 20;
    // sandboxd's default warm pool: claims and refills are part of what a churning service does
    const s = await startSandboxd({ args: ["--warm-pool", String(POOL)] });
    try {
      const start = await footprint(s);
      // The first rounds load code, fill SQLite's page cache and open the first TLS sessions: the level is taken after them.
      // The live heap is known from sandboxd's first full collection on: a few more rounds until there was one.
      let rounds = 0;
      let before: Footprint;
      do {
        await churn(s, rounds === 0 ? warmup : 5);
        rounds += rounds === 0 ? warmup : 5;
        await sleep(5000);
        before = await footprint(s);
      } while (Number.isNaN(before.live) && rounds < warmup + 50);
      const show = (f: Footprint) => `RSS ${f.rss.toFixed(1)} MiB, heap in use ${f.heap.toFixed(1)} MiB, live heap ${f.live.toFixed(1)} MiB`;
      ctx.log(`at start: ${show(start)}; after ${rounds} warm-up rounds: ${show(before)}`);
      const t0 = performance.now();
      const failed = await churn(s, n);
      const roundMs = (performance.now() - t0) / n;
      const after = await footprint(s);
      ctx.log(`after ${n} rounds (${roundMs.toFixed(0)} ms a round, ${failed} failed): ${show(after)}`);
      await sleep(IDLE_MS);
      const idle = await footprint(s);
      ctx.log(`after a minute idle: ${show(idle)}`);
      const base = `after ${rounds} warm-up rounds`;
      const per = (x: number, y: number) => `${(((x - y) * 1024) / n).toFixed(1)} KiB a round`;
      return [
        single(ID, "sandboxd RSS at start (ready, no create yet)", start.rss, "MiB"),
        compared({ scenario: ID, metric: `sandboxd RSS right after ${n} rounds`, value: after.rss, unit: "MiB", baseline: before.rss, baselineLabel: base, note: `${per(after.rss, before.rss)}; ${roundMs.toFixed(0)} ms a round${failed ? `; ${failed} rounds failed` : ""}` }),
        compared({
          scenario: ID, metric: `sandboxd RSS after ${n} rounds and a minute idle`, value: idle.rss, unit: "MiB", baseline: before.rss, baselineLabel: base,
          target: { text: "≤ 1.1× (back to its level)", met: (r) => r.ratio <= 1.1 }, note: per(idle.rss, before.rss),
        }),
        compared({ scenario: ID, metric: `sandboxd V8 heap in use right after ${n} rounds (lowest of ${READINGS} readings, garbage included)`, value: after.heap, unit: "MiB", baseline: before.heap, baselineLabel: base }),
        compared({ scenario: ID, metric: `sandboxd V8 heap in use after ${n} rounds and a minute idle (lowest of ${READINGS} readings, garbage included)`, value: idle.heap, unit: "MiB", baseline: before.heap, baselineLabel: base }),
        compared({
          scenario: ID, metric: `sandboxd live V8 heap (after its last full collection) after ${n} rounds and a minute idle`, value: idle.live, unit: "MiB", baseline: before.live, baselineLabel: base,
          target: { text: "≤ 1.1× (nothing kept per sandbox)", met: (r) => r.ratio <= 1.1 }, note: per(idle.live, before.live),
        }),
      ];
    } finally {
      await s.stop();
    }
  },
};

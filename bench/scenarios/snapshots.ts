/**
 * Scenario 16: snapshots, forks and pause to disk through the published SDK, each beside a
 * baseline of the same run: a fork → its first command (against `runc run true` of the same
 * rootfs and a create from the template), `count` forks at once against that many single ones,
 * the freeze a snapshot puts on a sandbox holding 1 GiB (the stall a process inside it sees,
 * against a bare `runc pause` + `resume`), a create from the snapshot against one from the
 * template, pause to disk and resume of an idle sandbox (against a kill and a create), and the
 * storage pool's space `--forks N` forks take beside their parent's.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { NODE, ROOT, startSandboxd } from "../../test/sandboxd/helpers/sandboxd.js";
import { needSandboxes } from "../lib/available.js";
import { bareRuncTrue } from "../lib/bare-runc.js";
import { compared, single } from "../lib/rows.js";
import { FORKS, PAUSES, script, SNAPSHOTS } from "../lib/snapshot-scripts.js";
import { sdkRun } from "../lib/sdk-run.js";
import { percentile } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "16-snapshots";
const MiB = 2 ** 20;
/** The most forks one fork request may ask for (sandboxd's limit). */
const MAX_PER_FORK = 20;
/** A range with room for 500 sandboxes (a /30 each), for runs with more forks than a test /24 holds. */
const WIDE_CIDR = "198.19.96.0/21";

/** The pool's allocated bytes, as statfs shows them and after XFS dropped speculative preallocation. */
interface PoolUse { raw: number; trimmed: number }
/** What the fork script measured. */
interface ForkOut { u0: PoolUse; u1: PoolUse; u2: PoolUse; parentBlocks: number; nMs: number; one: number[]; countMs: number }
/** What the snapshot script measured (windows as [start, end] on CLOCK_MONOTONIC, ms). */
interface SnapOut { calls: [number, number][]; pauses: [number, number][]; info: number[]; gaps: [number, number][]; fromSnap: number[]; fromTpl: number[] }
/** What the pause script measured. */
interface PauseOut { pause: number[]; resume: number[]; resumeFirst: number[]; create: number[]; createFirst: number[]; kill: number[] }

/** The longest stall (gap between the recorder's wake-ups) overlapping each window; 0 when none was over 2 ms. */
function stallsIn(windows: [number, number][], gaps: [number, number][]): number[] {
  return windows.map(([a, b]) => Math.max(0, ...gaps.filter(([s, e]) => e > a && s < b).map(([s, e]) => e - s)));
}

const p50 = (xs: number[]) => percentile(xs, 50);
const spread = (xs: number[]) => `p50 ${p50(xs).toFixed(0)}, p95 ${percentile(xs, 95).toFixed(0)}, max ${Math.max(...xs).toFixed(0)} ms of ${xs.length}`;

/** The fork rows: latency against runc and a create, `count` at once, and the pool's space. */
function forkRows(f: ForkOut, s: SnapOut, bare: number[], sizes: { forkMiB: number; n: number; count: number }): Row[] {
  const one = p50(f.one);
  const space = (k: keyof PoolUse, how: string, more = ""): Row => compared({
    scenario: ID, metric: `storage pool space: the parent and ${sizes.n} forks of it running, ${how}`, value: (f.u2[k] - f.u0[k]) / MiB, unit: "MiB",
    baseline: (f.u1[k] - f.u0[k]) / MiB, baselineLabel: `the parent alone (${sizes.forkMiB} MiB written)`,
    target: { text: "≤ 1.2× for 100 forks", met: (r) => r.ratio <= 1.2 },
    note: `${((f.u2[k] - f.u1[k]) / sizes.n / 1024).toFixed(0)} KiB of its own per fork; statfs of the pool after sync${more}`,
  });
  return [
    compared({
      scenario: ID, metric: `fork of a sandbox with ${sizes.forkMiB} MiB written → first command in the fork, p50 (${f.one.length})`, value: one, unit: "ms",
      baseline: p50(bare), baselineLabel: "runc run true, same rootfs", target: { text: "≤ 60 ms", met: (r) => r.value <= 60 }, note: spread(f.one),
    }),
    compared({ scenario: ID, metric: "the same fork → first command, p50", value: one, unit: "ms", baseline: p50(s.fromTpl), baselineLabel: "create from the template → first command (no warm pool)" }),
    compared({
      scenario: ID, metric: `fork count: ${sizes.count} → first command in every fork, total`, value: f.countMs, unit: "ms",
      baseline: sizes.count * one, baselineLabel: `${sizes.count} × one fork's p50`, target: { text: `≤ ${sizes.count}× one fork`, met: (r) => r.ratio <= 1 },
    }),
    space("raw", "as statfs shows it at once"),
    space("trimmed", "after XFS drops speculative preallocation (xfs_spaceman prealloc)", `; the parent's image allocates ${(f.parentBlocks / MiB).toFixed(0)} MiB (golden image blocks included); ${sizes.n} forks up in ${(f.nMs / 1000).toFixed(1)} s`),
  ];
}

/** The snapshot rows: the freeze inside the sandbox, the call, and creates from the snapshot. */
function snapshotRows(s: SnapOut, snapMiB: number): Row[] {
  const freeze = stallsIn(s.calls, s.gaps);
  const bareFreeze = stallsIn(s.pauses, s.gaps);
  const calls = s.calls.map(([a, b]) => b - a);
  return [
    compared({
      scenario: ID, metric: `snapshot of a sandbox with ${snapMiB} MiB written: freeze a process inside sees, p50 (${freeze.length})`, value: p50(freeze), unit: "ms",
      baseline: p50(bareFreeze), baselineLabel: "runc pause + resume of the same sandbox, as seen inside", target: { text: "≤ 100 ms", met: (r) => r.value <= 100 },
      note: `freeze ${spread(freeze)}; bare ${spread(bareFreeze)}; stalls under 2 ms count 0`,
    }),
    compared({
      scenario: ID, metric: "the snapshot call (createSnapshot), p50", value: p50(calls), unit: "ms", baseline: p50(s.info), baselineLabel: "getInfo of the same sandbox",
      note: `${spread(calls)}; the first flushes the data written just before (${calls[0].toFixed(0)} ms)`,
    }),
    compared({
      scenario: ID, metric: `create from that snapshot → first command, p50 (${s.fromSnap.length}, interleaved)`, value: p50(s.fromSnap), unit: "ms",
      baseline: p50(s.fromTpl), baselineLabel: "create from its template → first command (no warm pool)", target: { text: "≤ 1.2×", met: (r) => r.ratio <= 1.2 },
      note: `snapshot ${spread(s.fromSnap)}; template ${spread(s.fromTpl)}`,
    }),
  ];
}

/** The pause rows: pause to disk against a kill, resume against a create. */
function pauseRows(p: PauseOut): Row[] {
  const target = { text: "≤ 300 ms", met: (r: { value: number }) => r.value <= 300 };
  return [
    compared({ scenario: ID, metric: `pause({ keepMemory: false }) of an idle sandbox, p50 (${p.pause.length})`, value: p50(p.pause), unit: "ms", baseline: p50(p.kill), baselineLabel: "kill of an idle sandbox", target, note: spread(p.pause) }),
    compared({
      scenario: ID, metric: "its resume: Sandbox.connect, p50", value: p50(p.resume), unit: "ms", baseline: p50(p.create), baselineLabel: "Sandbox.create (no warm pool)", target,
      note: `${spread(p.resume)}; connect → first command p50 ${p50(p.resumeFirst).toFixed(0)} ms against create → first command ${p50(p.createFirst).toFixed(0)} ms`,
    }),
  ];
}

/** Scenario 16: see the module comment. */
export const snapshots: Scenario = {
  id: ID,
  title: "sandboxd: fork → first command, snapshot freeze and create from it, pause to disk and resume, pool space of N forks",
  async run(ctx: BenchContext): Promise<Row[]> {
    needSandboxes(ctx);
    const n = ctx.forks ?? (ctx.quick ? 5 : 100);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--forks must be a whole number of at least 1, got ${ctx.forks}`);
    const sizes = { forkMiB: ctx.quick ? 16 : 100, n, count: ctx.quick ? 2 : 10 };
    const snapMiB = ctx.sizeBytes ? Math.round(ctx.sizeBytes / MiB) : ctx.quick ? 32 : 1024;
    const rounds = ctx.quick ? 1 : 10;
    const s = await startSandboxd({ args: n + 3 > 50 ? ["--network-cidr", WIDE_CIDR] : [] });
    try {
      if (n + 3 > 100) {
        const set = spawnSync(NODE, [join(ROOT, "dist", "sandboxd"), "teams", "set", "default", "--max-concurrent", String(n + 10), "--data-dir", s.dataDir], { encoding: "utf8" });
        if (set.status !== 0) throw new Error(`raising the team's limit failed: ${set.stderr}`);
      }
      ctx.log(`sandboxd on ${s.dataDir}`);
      const cfg = { pool: join(s.dataDir, "storage"), runcRoot: join(s.dataDir, "runc"), maxPerFork: MAX_PER_FORK, rounds, ...sizes, snapMiB, idleMs: ctx.quick ? 500 : 2000 };
      ctx.log(`forks: ${n} for the pool's space, ${rounds} single, one of ${sizes.count}; parent with ${sizes.forkMiB} MiB`);
      const f = await sdkRun<ForkOut>(script(FORKS, cfg), [], s.sdkEnv);
      ctx.log(`snapshots of a sandbox with ${snapMiB} MiB written`);
      const snap = await sdkRun<SnapOut>(script(SNAPSHOTS, cfg), [], s.sdkEnv);
      ctx.log("pause to disk and resume");
      const p = await sdkRun<PauseOut>(script(PAUSES, cfg), [], s.sdkEnv);
      const bare = await bareRuncTrue(rounds);
      return [...forkRows(f, snap, bare, sizes), ...snapshotRows(snap, snapMiB), ...pauseRows(p)];
    } finally {
      await s.stop();
    }
  },
};

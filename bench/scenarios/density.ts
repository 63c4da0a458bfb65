/**
 * Scenario 13: many idle sandboxes on one host. Grows to `--sandboxes N` (default 250) through the
 * published SDK and, at 10, 100, 250, 500, 1,000 and N (those up to N), publishes what each idle
 * sandbox costs (memory, CPU), sandboxd's own RSS and CPU and that of the tools it runs, which of
 * its files spend that CPU (a profile through its inspector), the poller's rate, the API's list
 * (v2 page of 100) and get latencies, create failures and phases, whether every sandbox answers a
 * command, and the host sysctls in force.
 */
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { NODE, ROOT, startSandboxd } from "../../test/sandboxd/helpers/sandboxd.js";
import { needSandboxes } from "../lib/available.js";
import { sandboxKeys, sysctls } from "../lib/density-probe.js";
import { IDLE_SAMPLE_MS, measure, phasesSince, PROFILE_MS, type Point, type StepContext } from "../lib/density-step.js";
import { connectProfiler, inspectorUrl, type InspectorProfiler } from "../lib/inspector-profile.js";
import { compared, single } from "../lib/rows.js";
import { apiClient, machineUsedMiB, rssMiB, sandboxdPid } from "../lib/sandboxd-api.js";
import { startHolder } from "../lib/sdk-holder.js";
import { sleep } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "13-density";
/** A range wide enough for 2,048 sandboxes (a /30 each), inside the test networks' 198.18.0.0/15. */
const CIDR = "198.19.64.0/19";
/** Creates in flight at once while growing (the SDK user's parallelism). */
const WIDTH = 4;
/** The counts measured at, up to the count asked for. */
const MARKS = [10, 100, 250, 500, 1000];

/** The rows of one step. */
function stepRows(p: Point, first: Point, last: boolean): Row[] {
  const at = `at ${p.held}`;
  const phases = p.phases.n ? `; create phases (median of ${p.phases.n}): prepare ${p.phases.prepare} / runc run ${p.phases.runc} / network ${p.phases.network} / envd ${p.phases.envd} ms` : "";
  const profile = p.profile.map(([k, v]) => `${k} ${v.toFixed(1)}`).join(", ");
  return [
    single(ID, `creates ${at}: sandboxes added per second (${WIDTH} at once), failures`, p.added / (p.growMs / 1000), "creates/s", undefined, `${p.added} in ${(p.growMs / 1000).toFixed(1)} s, ${p.failed} failed${p.failed ? ` (${p.errors.join(" | ").slice(0, 300)})` : ""}${phases}`),
    single(ID, `memory per idle sandbox ${at}: cgroup median / machine (MemAvailable drop ÷ count)`, p.cgroupMiB, "MiB", last ? { text: "≤ 16 MiB", met: p.cgroupMiB <= 16 } : undefined, `machine: ${p.machineMiB.toFixed(1)} MiB each (noisy while other work runs); ${p.tasksPerSandbox.toFixed(1)} tasks each`),
    single(ID, `sandboxd RSS ${at}`, p.rssMiB, "MiB"),
    single(ID, `sandboxd CPU idle ${at} (its own / the tools it runs, e.g. runc)`, p.cpuPct, "% of a core", undefined, `tools: ${p.toolsCpuPct.toFixed(1)}% over ${IDLE_SAMPLE_MS / 1000} s; poller: ${p.pollsPerS.toFixed(1)} envd /metrics requests/s, ${p.pollFailures} failed`),
    single(ID, `sandboxd CPU by file ${at}, profiled ${PROFILE_MS / 1000} s (ms per s)`, p.profile.reduce((s, [, v]) => s + v, 0), "ms/s", undefined, profile || "no inspector"),
    single(ID, `CPU of all ${p.held} idle sandboxes together`, p.sandboxesCpuPct, "% of a core", undefined, `${(p.sandboxesCpuPct / Math.max(1, p.held)).toFixed(3)}% each`),
    compared({ scenario: ID, metric: `API list v2 page of 100, p50, ${at}`, value: p.listMs, unit: "ms", baseline: first.listMs, baselineLabel: `the same at ${first.held}`, target: last ? { text: "≤ 10 ms", met: (r) => r.value <= 10 } : undefined }),
    compared({ scenario: ID, metric: `API get one sandbox, p50, ${at}`, value: p.getMs, unit: "ms", baseline: first.getMs, baselineLabel: `the same at ${first.held}`, target: last ? { text: "≤ 10 ms", met: (r) => r.value <= 10 } : undefined }),
    single(ID, `sandboxes answering commands.run('true') ${at}`, p.answered, "sandboxes", { text: "every one", met: p.unanswered === 0 && p.answered === p.held }),
  ];
}

/** Scenario 13: density of idle sandboxes and how sandboxd and its API scale with them. */
export const density: Scenario = {
  id: ID,
  title: "sandboxd: N idle sandboxes on one host (per step: memory and CPU each, sandboxd RSS/CPU by file, poller, list/get, failures, sysctls)",
  async run(ctx: BenchContext): Promise<Row[]> {
    needSandboxes(ctx);
    const n = ctx.sandboxes ?? (ctx.quick ? 12 : 250);
    const marks = [...new Set([...MARKS.filter((m) => m < n), n])];
    const limits = sysctls();
    ctx.log(`sysctls in force: ${JSON.stringify(limits)}`);
    // debug logs carry each create's phases; the inspector lets the step profile sandboxd
    const s = await startSandboxd({ args: ["--network-cidr", CIDR, "--log-level", "debug"], env: { NODE_OPTIONS: "--inspect=127.0.0.1:0" } });
    const rows: Row[] = [];
    let profiler: InspectorProfiler | undefined;
    try {
      const set = spawnSync(NODE, [join(ROOT, "dist", "sandboxd"), "teams", "set", "default", "--max-concurrent", String(n + 10), "--data-dir", s.dataDir], { encoding: "utf8" });
      if (set.status !== 0) throw new Error(`raising the team's limit failed: ${set.stderr}`);
      const pid = sandboxdPid(s);
      const url = inspectorUrl(s.logs());
      profiler = url ? await connectProfiler(url).catch(() => undefined) : undefined;
      const api = apiClient(s);
      const holder = startHolder(s.sdkEnv);
      try {
        await sleep(3_000);
        const c: StepContext = { s, api, pid, holder, profiler, usedBefore: machineUsedMiB() };
        const rss0 = rssMiB(pid);
        const keys0 = sandboxKeys();
        const points: Point[] = [];
        let seen = 0;
        for (const m of marks) {
          const before = points[points.length - 1]?.held ?? 0;
          const g = await holder.step(`grow ${m} ${WIDTH}`);
          const ph = phasesSince(s.logs(), seen);
          seen = ph.seen;
          const held = Number(g.held);
          ctx.log(`${held} sandboxes held (${Number(g.failed)} creates failed in this step${Number(g.failed) ? `: ${JSON.stringify(g.errors)}` : ""}) after ${(Number(g.ms) / 1000).toFixed(1)} s`);
          const p = await measure(c, { held, failed: Number(g.failed), errors: (g.errors as string[]) ?? [], growMs: Number(g.ms), added: held - before, phases: ph.phases });
          ctx.log(`at ${p.held}: ${JSON.stringify(p)}`);
          points.push(p);
          if (p.held < m) break;
        }
        const last = points[points.length - 1];
        const failed = points.reduce((a, p) => a + p.failed, 0);
        rows.push(single(ID, `sandboxes started of ${n} asked (${WIDTH} creates at once)`, last.held, "sandboxes", { text: `all ${n}, none failed`, met: last.held === n && failed === 0 }, `${failed} creates failed and were retried`));
        for (const p of points) rows.push(...stepRows(p, points[0], p === last));
        const use = last.kernel;
        rows.push(single(ID, "host sysctls in force (read, never changed)", NaN, "", undefined, `${Object.entries(limits).map(([k, v]) => `${k} = ${v}`).join(", ")}; in use with ${last.held} sandboxes: ${use.neighbours} neighbour entries (all permanent ones included), ${use.conntrack} tracked connections, ${use.files} open files, ${use.tasks} tasks`));
        rows.push(single(ID, `kernel keys held by the sandboxes' host uid, with ${last.held} sandboxes`, last.keys - keys0.keys, "keys", { text: "none per sandbox", met: last.keys - keys0.keys < last.held }, `${keys0.keys} before; sandboxd RSS with none: ${rss0.toFixed(0)} MiB`));
      } finally {
        // every sandbox goes, whatever failed above (sandboxd's stop sweeps what a kill missed)
        await holder.step(`kill ${WIDTH * 2}`).catch(() => undefined);
        await holder.close();
        api.close();
      }
      return rows;
    } finally {
      profiler?.close();
      await s.stop();
    }
  },
};

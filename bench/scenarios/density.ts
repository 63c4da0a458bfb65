/**
 * Scenario 13: many idle sandboxes on one host. Grows to `--sandboxes N` (default 250) through the
 * published SDK, and at 10, 100 and N publishes the memory each idle sandbox costs, sandboxd's own
 * RSS and CPU, and the API's list (v2 page of 100) and get latencies beside the same calls at 10.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { MAPPED_ROOT } from "../../src/sandboxd/host/idmap.js";
import { instanceKey } from "../../src/sandboxd/host/instance.js";
import { NODE, ROOT, startSandboxd, type Sandboxd } from "../../test/sandboxd/helpers/sandboxd.js";
import { needSandboxes } from "../lib/available.js";
import { cpuSeconds } from "../lib/procfs.js";
import { compared, single } from "../lib/rows.js";
import { apiClient, machineUsedMiB, rssMiB, sandboxdPid, type ApiClient } from "../lib/sandboxd-api.js";
import { startHolder } from "../lib/sdk-holder.js";
import { median, sleep } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "13-density";
/** A range wide enough for 2,048 sandboxes (a /30 each), inside the test networks' 198.18.0.0/15. */
const CIDR = "198.19.64.0/19";
/** Creates in flight at once while growing (the SDK user's parallelism). */
const WIDTH = 4;
/** How long sandboxd's CPU is sampled with every sandbox idle. */
const IDLE_SAMPLE_MS = 10_000;

/** What was measured at one count of idle sandboxes. */
interface Point {
  held: number;
  failed: number;
  growMs: number;
  cgroupMiB: number;
  machineMiB: number;
  rssMiB: number;
  cpuPct: number;
  listMs: number;
  getMs: number;
  keys: number;
  /** CPU of all the sandboxes together while idle, % of one core. */
  sandboxesCpuPct: number;
}

/** CPU time of all the instance's sandboxes so far (cgroup v1 cpuacct or v2 cpu.stat), seconds. */
function sandboxesCpuSeconds(dataDir: string): number {
  const parent = `sandboxd-${instanceKey(dataDir)}`;
  try {
    return Number(readFileSync(`/sys/fs/cgroup/cpuacct/${parent}/cpuacct.usage`, "utf8")) / 1e9;
  } catch {
    const m = /^usage_usec (\d+)$/m.exec(readFileSync(`/sys/fs/cgroup/${parent}/cpu.stat`, "utf8"));
    return m ? Number(m[1]) / 1e6 : NaN;
  }
}

/** Kernel keys held by the sandboxes' host uid and that uid's quota (/proc/key-users). */
function sandboxKeys(): { keys: number; quota: number } {
  const line = readFileSync("/proc/key-users", "utf8").split("\n").find((l) => l.trim().startsWith(`${MAPPED_ROOT}:`));
  const m = line ? /\s(\d+)\/(\d+)\s+\d+\/\d+\s*$/.exec(line) : null;
  return m ? { keys: Number(m[1]), quota: Number(m[2]) } : { keys: 0, quota: Number(readFileSync("/proc/sys/kernel/keys/maxkeys", "utf8")) };
}

/** Memory charged to each sandbox's cgroup (cgroup v1 or v2), MiB. */
function cgroupMiBs(dataDir: string): number[] {
  const parent = `sandboxd-${instanceKey(dataDir)}`;
  for (const [dir, file] of [[`/sys/fs/cgroup/memory/${parent}`, "memory.usage_in_bytes"], [`/sys/fs/cgroup/${parent}`, "memory.current"]]) {
    try {
      return readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => Number(readFileSync(join(dir, d.name, file), "utf8")) / 2 ** 20);
    } catch {
      // not this hierarchy
    }
  }
  return [];
}

/** Measures one point: settles, samples CPU with everything idle, then times the API. */
async function measure(s: Sandboxd, api: ApiClient, pid: number, held: number, failed: number, growMs: number, usedBefore: number): Promise<Point> {
  await sleep(5_000);
  const cpu0 = cpuSeconds(pid);
  const all0 = sandboxesCpuSeconds(s.dataDir);
  await sleep(IDLE_SAMPLE_MS);
  const cpuPct = ((cpuSeconds(pid) - cpu0) / (IDLE_SAMPLE_MS / 1000)) * 100;
  const sandboxesCpuPct = ((sandboxesCpuSeconds(s.dataDir) - all0) / (IDLE_SAMPLE_MS / 1000)) * 100;
  const list = await api.get("/v2/sandboxes?limit=1");
  const one = (JSON.parse(list.body) as { sandboxID: string }[])[0]?.sandboxID;
  return {
    held, failed, growMs, cpuPct, sandboxesCpuPct, keys: sandboxKeys().keys,
    cgroupMiB: median(cgroupMiBs(s.dataDir)),
    machineMiB: (machineUsedMiB() - usedBefore) / Math.max(1, held),
    rssMiB: rssMiB(pid),
    listMs: await api.p50("/v2/sandboxes?limit=100", 20),
    getMs: one ? await api.p50(`/sandboxes/${one}`, 20) : NaN,
  };
}

/** Scenario 13: density of idle sandboxes and how sandboxd and its API scale with them. */
export const density: Scenario = {
  id: ID,
  title: "sandboxd: N idle sandboxes on one host (memory each, sandboxd RSS/CPU, list/get at 10 vs N)",
  async run(ctx: BenchContext): Promise<Row[]> {
    needSandboxes(ctx);
    const n = ctx.sandboxes ?? (ctx.quick ? 12 : 250);
    const marks = [...new Set([10, 100, n].filter((m) => m <= n))];
    const s = await startSandboxd({ args: ["--network-cidr", CIDR] });
    const rows: Row[] = [];
    try {
      const set = spawnSync(NODE, [join(ROOT, "dist", "sandboxd"), "teams", "set", "default", "--max-concurrent", String(n + 10), "--data-dir", s.dataDir], { encoding: "utf8" });
      if (set.status !== 0) throw new Error(`raising the team's limit failed: ${set.stderr}`);
      const pid = sandboxdPid(s);
      const api = apiClient(s);
      const holder = startHolder(s.sdkEnv);
      try {
        await sleep(3_000);
        const usedBefore = machineUsedMiB();
        const rss0 = rssMiB(pid);
        const keys0 = sandboxKeys();
        const points: Point[] = [];
        let failed = 0;
        for (const m of marks) {
          const g = await holder.step(`grow ${m} ${WIDTH}`);
          failed += Number(g.failed);
          ctx.log(`${g.held} sandboxes held (${failed} creates failed${failed ? `: ${JSON.stringify(g.errors)}` : ""}) after ${(Number(g.ms) / 1000).toFixed(1)} s`);
          const p = await measure(s, api, pid, Number(g.held), failed, Number(g.ms), usedBefore);
          ctx.log(`at ${p.held}: ${JSON.stringify(p)}`);
          points.push(p);
        }
        const check = await holder.step(`check ${WIDTH * 2}`);
        const last = points[points.length - 1];
        const first = points[0];
        rows.push(single(ID, `sandboxes started of ${n} asked (${WIDTH} creates at once)`, last.held, "sandboxes", { text: `all ${n}, none failed`, met: last.held === n && last.failed === 0 }, last.failed ? `${last.failed} creates failed and were retried` : `${(last.growMs / 1000).toFixed(1)} s for the last ${n - (points[points.length - 2]?.held ?? 0)}`));
        rows.push(single(ID, `of those, answering commands.run('true') at ${last.held}`, Number(check.checked) - Number(check.failed), "sandboxes", { text: "every one", met: Number(check.failed) === 0 }, Number(check.failed) ? JSON.stringify(check.errors).slice(0, 200) : undefined));
        for (const p of points) {
          rows.push(single(ID, `memory per idle sandbox at ${p.held}: cgroup median / machine (MemAvailable drop ÷ count)`, p.cgroupMiB, "MiB", p.held === last.held ? { text: "≤ 16 MiB", met: p.cgroupMiB <= 16 } : undefined, `machine: ${p.machineMiB.toFixed(1)} MiB each (noisy while other work runs)`));
          rows.push(single(ID, `sandboxd RSS / CPU idle at ${p.held} sandboxes`, p.rssMiB, "MiB", undefined, `${rss0.toFixed(0)} MiB with none; CPU ${p.cpuPct.toFixed(1)}% of one core over ${IDLE_SAMPLE_MS / 1000} s idle`));
          rows.push(single(ID, `CPU of all ${p.held} idle sandboxes together (envd answering the metrics poller every 5 s)`, p.sandboxesCpuPct, "% of a core", undefined, `${(p.sandboxesCpuPct / Math.max(1, p.held)).toFixed(2)}% each`));
          rows.push(compared({ scenario: ID, metric: `API list v2 page of 100, p50, at ${p.held} sandboxes`, value: p.listMs, unit: "ms", baseline: first.listMs, baselineLabel: `the same at ${first.held}`, target: p === last ? { text: "≤ 10 ms", met: (r) => r.value <= 10 } : undefined }));
          rows.push(compared({ scenario: ID, metric: `API get one sandbox, p50, at ${p.held} sandboxes`, value: p.getMs, unit: "ms", baseline: first.getMs, baselineLabel: `the same at ${first.held}`, target: p === last ? { text: "≤ 10 ms", met: (r) => r.value <= 10 } : undefined }));
        }
        rows.push(single(ID, `kernel keys held by the sandboxes' host uid, with ${last.held} sandboxes`, last.keys - keys0.keys, "keys", { text: "none per sandbox", met: last.keys - keys0.keys < last.held }, `${keys0.keys} before (other sandboxd instances' sandboxes); the uid's quota is ${keys0.quota}`));
        await holder.step(`kill ${WIDTH * 2}`);
      } finally {
        await holder.close();
        api.close();
      }
      return rows;
    } finally {
      await s.stop();
    }
  },
};

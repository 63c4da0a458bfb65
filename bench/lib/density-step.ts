/**
 * One step of the density scenario: after growing to a count of idle sandboxes, what the host and
 * sandboxd pay for them (memory, CPU of sandboxd, of the tools it runs and of the sandboxes, and a
 * CPU profile of sandboxd saying which of its files spends it), what the API answers in, and
 * whether every sandbox still answers a command. With BENCH_DENSITY_PROFILES=DIR each profile is
 * also written there as sandboxd-at-<count>.cpuprofile.
 */
import { join } from "node:path";
import type { Sandboxd } from "../../test/sandboxd/helpers/sandboxd.js";
import { cgroupMiBs, kernelUse, processCpu, promCounter, sandboxesCpuSeconds, sandboxKeys, sandboxTasks } from "./density-probe.js";
import type { Attribution, InspectorProfiler } from "./inspector-profile.js";
import { machineUsedMiB, rssMiB, type ApiClient } from "./sandboxd-api.js";
import type { SdkHolder } from "./sdk-holder.js";
import { median, sleep } from "./stats.js";

/** How long sandboxd's and the sandboxes' CPU is sampled with every sandbox idle. */
export const IDLE_SAMPLE_MS = 10_000;
/** How long sandboxd is profiled, right after the CPU sample. */
export const PROFILE_MS = 10_000;

/** Medians of the `create phases` lines sandboxd logged for this step's creates, ms. */
export interface Phases {
  n: number;
  prepare: number;
  runc: number;
  network: number;
  envd: number;
}

/** What was measured at one count of idle sandboxes. */
export interface Point {
  held: number;
  /** Creates that failed during this step's growth (each retried). */
  failed: number;
  errors: string[];
  growMs: number;
  /** Sandboxes added in this step. */
  added: number;
  phases: Phases;
  cgroupMiB: number;
  machineMiB: number;
  rssMiB: number;
  /** sandboxd's own CPU while idle, % of one core. */
  cpuPct: number;
  /** CPU of the tools sandboxd ran meanwhile (runc and the like), % of one core. */
  toolsCpuPct: number;
  /** CPU of all the sandboxes together while idle, % of one core. */
  sandboxesCpuPct: number;
  /** envd /metrics requests the poller sent per second, and failures, over the idle sample. */
  pollsPerS: number;
  pollFailures: number;
  /** sandboxd's CPU by owning file over the profile window, ms per s (largest first). */
  profile: [string, number][];
  listMs: number;
  getMs: number;
  /** Sandboxes that answered commands.run('true') (and those that did not). */
  answered: number;
  unanswered: number;
  tasksPerSandbox: number;
  keys: number;
  kernel: ReturnType<typeof kernelUse>;
}

/** Reads the medians of the `create phases` log lines past the first `seen`; returns them and the new count. */
export function phasesSince(logs: string, seen: number): { phases: Phases; seen: number } {
  const lines = logs.split("\n").filter((l) => l.includes('"create phases"'));
  const fresh = lines.slice(seen).map((l) => JSON.parse(l) as Record<string, number>);
  const med = (k: string) => median(fresh.map((f) => f[k]).filter((v) => typeof v === "number"));
  return { phases: { n: fresh.length, prepare: med("prepareMs"), runc: med("runcRunMs"), network: med("networkMs"), envd: med("envdMs") }, seen: lines.length };
}

/** The owners that spent the most, largest first, with everything else summed as "other". */
function top(a: Attribution | undefined, n = 8): [string, number][] {
  if (!a) return [];
  const all = [...a.entries()].sort((x, y) => y[1] - x[1]);
  const rest = all.slice(n).reduce((s, [, v]) => s + v, 0);
  return [...all.slice(0, n), ...(rest > 0 ? [["other", rest] as [string, number]] : [])];
}

/** What a step measures with: the instance, its API, its pid, the SDK holder and (when sandboxd has an inspector) a profiler. */
export interface StepContext {
  s: Sandboxd;
  api: ApiClient;
  pid: number;
  holder: SdkHolder;
  profiler?: InspectorProfiler;
  /** The machine's memory in use before any sandbox, MiB. */
  usedBefore: number;
}

/** Measures one point: settles, samples CPU with everything idle, profiles sandboxd, times the API, then checks every sandbox answers. */
export async function measure(c: StepContext, grown: Pick<Point, "held" | "failed" | "errors" | "growMs" | "added" | "phases">): Promise<Point> {
  const { s, api, pid } = c;
  await sleep(5_000);
  const polls = async () => {
    const text = (await api.get("/metrics")).body;
    return { requests: promCounter(text, "sandboxd_envd_polls_total"), failures: promCounter(text, "sandboxd_envd_poll_failures_total") };
  };
  const p0 = await polls();
  const cpu0 = processCpu(pid);
  const all0 = sandboxesCpuSeconds(s.dataDir);
  await sleep(IDLE_SAMPLE_MS);
  const cpu1 = processCpu(pid);
  const all1 = sandboxesCpuSeconds(s.dataDir);
  const p1 = await polls();
  const pct = (a: number, b: number) => ((b - a) / (IDLE_SAMPLE_MS / 1000)) * 100;
  const dir = process.env.BENCH_DENSITY_PROFILES;
  const profile = top(await c.profiler?.profile(PROFILE_MS, dir ? join(dir, `sandboxd-at-${grown.held}.cpuprofile`) : undefined));
  const list = await api.get("/v2/sandboxes?limit=1");
  const one = (JSON.parse(list.body) as { sandboxID: string }[])[0]?.sandboxID;
  const listMs = await api.p50("/v2/sandboxes?limit=100", 20);
  const getMs = one ? await api.p50(`/sandboxes/${one}`, 20) : NaN;
  const check = await c.holder.step("check 8");
  return {
    ...grown,
    cgroupMiB: median(cgroupMiBs(s.dataDir)),
    machineMiB: (machineUsedMiB() - c.usedBefore) / Math.max(1, grown.held),
    rssMiB: rssMiB(pid),
    cpuPct: pct(cpu0.self, cpu1.self),
    toolsCpuPct: pct(cpu0.children, cpu1.children),
    sandboxesCpuPct: pct(all0, all1),
    pollsPerS: (p1.requests - p0.requests) / (IDLE_SAMPLE_MS / 1000),
    pollFailures: p1.failures - p0.failures,
    profile,
    listMs,
    getMs,
    answered: Number(check.checked) - Number(check.failed),
    unanswered: Number(check.failed),
    tasksPerSandbox: sandboxTasks(s.dataDir) / Math.max(1, grown.held),
    keys: sandboxKeys().keys,
    kernel: kernelUse(),
  };
}

/**
 * Scenario 14: where create → first command goes, and what the proxy adds to a command. Publishes
 * the breakdown (sandboxd's own log: the create's time and its cold phases, the proxy's time on
 * the first command; the SDK's side: the 201, the connect to the sandbox's host, the first and a
 * second commands.run), then commands.run('true') on a running sandbox through the proxy beside
 * envd reached directly, what the login shell the SDK asks for costs inside the sandbox, and what
 * of `runc run true` the sandbox's runc config costs (each part of it taken out alone).
 */
import { startSandboxd, waitWarmPool, type Sandboxd } from "../../test/sandboxd/helpers/sandboxd.js";
import { needSandboxes } from "../lib/available.js";
import { RUNC_VARIANTS, runcVariants } from "../lib/bare-runc.js";
import { compared, single } from "../lib/rows.js";
import { sdkRun } from "../lib/sdk-run.js";
import { SDK_BREAKDOWN, SDK_ROUNDTRIP } from "../lib/sdk-timing.js";
import { percentile } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "14-sandbox-paths";

/** One SDK round as the breakdown script reports it. */
interface Round {
  id: string;
  createMs: number;
  firstRunMs: number;
  connectMs: number | null;
  secondRunMs: number;
  totalMs: number;
}

/** sandboxd's JSON log lines. */
function logLines(s: Sandboxd): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of s.logs().split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      out.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // not a log line
    }
  }
  return out;
}

/** p50 of a field over the log lines with message `msg` for the given sandboxes (first per sandbox). */
function logP50(lines: Record<string, unknown>[], msg: string, ids: Set<string>, field: string): number {
  const seen = new Set<string>();
  const xs: number[] = [];
  for (const l of lines) {
    const id = String(l.sandboxID);
    if (l.msg !== msg || !ids.has(id) || seen.has(id)) continue;
    seen.add(id);
    if (typeof l[field] === "number") xs.push(l[field] as number);
  }
  return percentile(xs, 50);
}

/** The breakdown rows of `n` rounds on a sandboxd with `pool` warm sandboxes, `pauseMs` apart. */
async function breakdown(label: string, n: number, pool: number, pauseMs: number): Promise<Row[]> {
  const s = await startSandboxd({ args: ["--warm-pool", String(pool), "--log-level", "debug"] });
  try {
    if (pool > 0) await waitWarmPool(s, pool);
    const rounds = await sdkRun<Round[]>(SDK_BREAKDOWN, [n, pauseMs], s.sdkEnv);
    const lines = logLines(s);
    const ids = new Set(rounds.map((r) => r.id));
    const p = (f: (r: Round) => number | null) => percentile(rounds.map(f).filter((x): x is number => x !== null), 50);
    const row = (metric: string, value: number, note?: string) => single(ID, `${label}: ${metric}, p50`, value, "ms", undefined, note);
    const rows = [
      row("create → first command (SDK)", p((r) => r.totalMs), `${n} rounds`),
      row("SDK: Sandbox.create() → 201", p((r) => r.createMs)),
      row("sandboxd: the create's own time (its log)", logP50(lines, "sandbox created", ids, "ms")),
    ];
    if (pool === 0) {
      const wired = lines.filter((l) => l.msg === "create phases" && ids.has(String(l.sandboxID)) && l.wiredAhead === true).length;
      for (const f of ["prepareMs", "runcRunMs", "networkMs", "envdMs", "listenMs"]) {
        rows.push(row(`sandboxd cold phase ${f.replace(/Ms$/, "")}`, logP50(lines, "create phases", ids, f), f === "networkMs" ? `${wired} of ${n} on a network slot wired ahead` : f === "listenMs" ? "part of envd: until its socket listens" : undefined));
      }
    } else {
      for (const f of ["rulesMs", "cpuMs", "initMs"]) rows.push(row(`sandboxd claim: ${f.replace(/Ms$/, "")} done after`, logP50(lines, "claim phases", ids, f)));
    }
    rows.push(
      row("SDK: first commands.run('true'), connect included", p((r) => r.firstRunMs)),
      row("SDK: TCP + TLS connect to the sandbox's host", p((r) => r.connectMs), `${rounds.filter((r) => r.connectMs !== null).length} of ${n} rounds made a new connection`),
      row("sandboxd: the proxy's time on the first command (its log)", logP50(lines, "proxied", ids, "ms")),
      row("SDK: second commands.run('true')", p((r) => r.secondRunMs)),
    );
    return rows;
  } finally {
    await s.stop();
  }
}

/** commands.run('true') through the proxy vs envd reached directly, and the login shell's cost. */
async function roundtrip(pairs: number): Promise<Row[]> {
  const s = await startSandboxd();
  try {
    const r = await sdkRun<{ proxy: number[]; envd: number[]; shell: { login: number; plain: number } }>(SDK_ROUNDTRIP, [pairs], s.sdkEnv);
    const label = "envd reached directly (SDK sandboxUrl, HTTP/1.1)";
    return [
      compared({ scenario: ID, metric: `commands.run('true') on a running sandbox through the proxy, p50 (${pairs} interleaved)`, value: percentile(r.proxy, 50), unit: "ms", baseline: percentile(r.envd, 50), baselineLabel: label, target: { text: "≤ 4 ms and ≤ 1.3×", met: (x) => x.value <= 4 && x.ratio <= 1.3 } }),
      compared({ scenario: ID, metric: "commands.run('true') through the proxy, p95", value: percentile(r.proxy, 95), unit: "ms", baseline: percentile(r.envd, 95), baselineLabel: label }),
      compared({ scenario: ID, metric: "inside the sandbox: bash -l -c true (what the SDK runs), mean of 100", value: r.shell.login, unit: "ms", baseline: r.shell.plain, baselineLabel: "bash -c true" }),
    ];
  } finally {
    await s.stop();
  }
}

/** What of `runc run true`'s time the sandbox's config costs: each part taken out alone, interleaved round by round. */
async function runcConfig(rounds: number): Promise<Row[]> {
  const runs = await runcVariants(rounds);
  const base = percentile(runs.get(RUNC_VARIANTS[0].name)!, 50);
  return RUNC_VARIANTS.slice(1).map((v) => compared({
    scenario: ID, metric: `runc run true: ${v.name}, p50 (${rounds})`, value: percentile(runs.get(v.name)!, 50), unit: "ms", baseline: base, baselineLabel: "runc run true with the sandbox's config",
  }));
}

/** Scenario 14: the create → first command breakdown and the proxy's round trip. */
export const sandboxPaths: Scenario = {
  id: ID,
  title: "sandboxd: create → first command breakdown; commands.run through the proxy vs envd directly",
  async run(ctx: BenchContext): Promise<Row[]> {
    needSandboxes(ctx);
    return [
      ...(await roundtrip(ctx.quick ? 20 : 300)),
      ...(await breakdown("warm pool of 2, creates 1.5 s apart", ctx.quick ? 2 : 20, 2, 1500)),
      ...(await breakdown("no pool (cold)", ctx.quick ? 2 : 10, 0, 0)),
      ...(await runcConfig(ctx.quick ? 2 : 15)),
    ];
  },
};

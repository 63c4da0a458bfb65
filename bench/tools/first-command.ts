// Where a warm create → first commands.run('true') goes, per round and as medians: the SDK's side
// (Sandbox.create() → 201, the TCP + TLS connect to the sandbox's host, the first and a second
// commands.run), sandboxd's (its own time for the create, the claim's phases, the proxy's time on
// the first command: whether it opened its h2c session to envd, when envd's answer began) and
// envd's (its access log in the sandbox's console: /init, the first and the second Start, each
// from its request to its answer's end). Sandboxes stay up until the end so their console can be
// read. Run two builds' copies of this tool alternately to compare them.
// Usage: node build/bench/tools/first-command.js [ROUNDS=20] [PAUSE_MS=1500] [POOL=2]
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startSandboxd, waitWarmPool } from "../../test/sandboxd/helpers/sandboxd.js";
import { sdkRun } from "../lib/sdk-run.js";
import { percentile } from "../lib/stats.js";
import { envdRequests, firstLine, jsonLines, type Line } from "./first-command-logs.js";

const rounds = Number(process.argv[2] ?? 20);
const pauseMs = Number(process.argv[3] ?? 1500);
const pool = Number(process.argv[4] ?? 2);

/** The SDK's side of each round: create, first and second command; sandboxes are left running. */
const SDK_ROUNDS = `
const { Sandbox } = await import("e2b");
const dc = await import("node:diagnostics_channel");
const n = Number(process.argv[1]);
const pauseMs = Number(process.argv[2]);
const connects = [];
const started = new Map();
dc.subscribe("undici:client:beforeConnect", ({ connectParams: p }) => started.set(p.host, performance.now()));
dc.subscribe("undici:client:connected", ({ connectParams: p }) => connects.push({ host: p.host, ms: performance.now() - (started.get(p.host) ?? NaN), at: performance.now() }));
const out = [];
for (let i = 0; i < n; i++) {
  await new Promise((r) => setTimeout(r, pauseMs));
  const t0 = performance.now();
  const sbx = await Sandbox.create();
  const t1 = performance.now();
  const r = await sbx.commands.run("true");
  const t2 = performance.now();
  if (r.exitCode !== 0) throw new Error("true exited " + r.exitCode);
  await sbx.commands.run("true");
  const t3 = performance.now();
  const c = connects.find((x) => x.host.includes(sbx.sandboxId) && x.at >= t1 && x.at <= t2);
  out.push({ id: sbx.sandboxId, create: t1 - t0, first: t2 - t1, connect: c ? c.ms : null, second: t3 - t2, total: t2 - t0 });
}
console.log(JSON.stringify(out));
`;

interface Round {
  id: string;
  create: number;
  first: number;
  connect: number | null;
  second: number;
  total: number;
}

const s = await startSandboxd({ args: ["--warm-pool", String(pool), "--log-level", "debug"] });
try {
  if (pool > 0) await waitWarmPool(s, pool);
  const got = await sdkRun<Round[]>(SDK_ROUNDS, [rounds, pauseMs], s.sdkEnv);
  const lines = jsonLines(s.logs());
  const table: Record<string, number | null>[] = [];
  for (const r of got) {
    const created = firstLine(lines, "sandbox created", r.id);
    const claim = firstLine(lines, "claim phases", r.id);
    const proxied = lines.filter((l) => l.msg === "proxied" && l.sandboxID === r.id);
    const envd = envdRequests(readConsole(s.dataDir, r.id));
    const num = (l: Line | undefined, k: string) => (typeof l?.[k] === "number" ? (l[k] as number) : null);
    table.push({
      total: r.total, create: r.create, sandboxdCreate: num(created, "ms"), claimRules: num(claim, "rulesMs"), claimCpu: num(claim, "cpuMs"), claimInit: num(claim, "initMs"),
      envdInit: envd.init, first: r.first, connect: r.connect, proxyFirst: num(proxied[0], "ms"), proxyFirstHead: num(proxied[0], "headMs"), proxyFirstDialed: proxied[0]?.dialed === true ? 1 : 0,
      envdFirstStart: envd.starts[0] ?? null, second: r.second, proxySecond: num(proxied[1], "ms"), envdSecondStart: envd.starts[1] ?? null,
    });
  }
  const keys = Object.keys(table[0] ?? {});
  const fmt = (x: number | null | undefined) => (x === null || x === undefined || Number.isNaN(x) ? "-" : x.toFixed(1));
  console.log(["field", "p50", "p95", "min", "max"].join("\t"));
  for (const k of keys) {
    const xs = table.map((t) => t[k]).filter((x): x is number => typeof x === "number");
    console.log([k, fmt(percentile(xs, 50)), fmt(percentile(xs, 95)), fmt(Math.min(...xs)), fmt(Math.max(...xs))].join("\t"));
  }
  const warnings = lines.filter((l) => l.level === "warn" || l.level === "error").map((l) => `${String(l.msg)}: ${String(l.err ?? "")}`);
  console.log(`sandboxd warnings and errors: ${warnings.length}${warnings.length ? `\n  ${[...new Set(warnings)].slice(0, 10).join("\n  ")}` : ""}`);
  console.log(JSON.stringify({ rounds: table }));
} finally {
  await s.stop();
}

/** A sandbox's console output (envd's log among it), or "" when it cannot be read. */
function readConsole(dataDir: string, id: string): string {
  try {
    return readFileSync(join(dataDir, "sandboxes", id, "disk", "console.log"), "utf8");
  } catch {
    return "";
  }
}

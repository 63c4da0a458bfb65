import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { call, startSandboxd, waitWarmPool, type Sandboxd } from "../../test/sandboxd/helpers/sandboxd.js";
import { needSandboxes } from "../lib/available.js";
import { bareRuncTrue } from "../lib/bare-runc.js";
import { compared, single } from "../lib/rows.js";
import { sdkChild, sdkRun } from "../lib/sdk-run.js";
import { percentile } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "10-sandbox-create";

/**
 * What the SDK user runs, in a fresh Node trusting sandboxd's CA: per round, create → first
 * commands.run('true') (the time measured) → kill. Prints one JSON line of milliseconds.
 */
const SDK_ROUNDS = `
const { Sandbox } = await import("e2b");
const n = Number(process.argv[1]);
const pauseMs = Number(process.argv[2] ?? 0);
const ms = [];
for (let i = 0; i < n; i++) {
  if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
  const t0 = performance.now();
  const sbx = await Sandbox.create();
  const r = await sbx.commands.run("true");
  ms.push(performance.now() - t0);
  if (r.exitCode !== 0) throw new Error("true exited " + r.exitCode);
  await sbx.kill();
}
console.log(JSON.stringify(ms));
`;

/** Holds `count` sandboxes open and prints their IDs, then waits for stdin to close and kills them. */
const SDK_HOLD = `
const { Sandbox } = await import("e2b");
const n = Number(process.argv[1]);
const all = [];
for (let i = 0; i < n; i++) all.push(await Sandbox.create({ timeoutMs: 600_000 }));
console.log(JSON.stringify(all.map((s) => s.sandboxId)));
process.stdin.resume();
process.stdin.on("end", async () => { await Promise.all(all.map((s) => s.kill())); process.exit(0); });
`;


/** RSS of a pid in MiB. */
function rssMiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** The warm pool's size in the pooled half of the scenario (sandboxd's default). */
const POOL = 2;
/** The pause between rounds of the spaced run: the pool has refilled before each create. */
const SPACED_MS = 1500;

/** Pool claims and misses sandboxd counted (its /metrics). */
async function createCounts(s: Sandboxd): Promise<{ pool: number; cold: number }> {
  const text = await call(s.port, readFileSync(s.caFile), "api.e2b.localhost", "/metrics", { headers: { "x-api-key": s.apiKey } });
  const n = (from: string) => Number(new RegExp(`^sandboxd_creates_total\\{from="${from}"\\} (\\d+)$`, "m").exec(text.body)?.[1] ?? NaN);
  return { pool: n("pool"), cold: n("cold") };
}

/**
 * Create → first command, `n` times, on a sandboxd with `pool` warm sandboxes per template (0:
 * every create is cold); with `pauseMs`, that long between a kill and the next create.
 */
async function rounds(n: number, pool: number, pauseMs = 0): Promise<{ ms: number[]; claimed: number }> {
  const s = await startSandboxd({ args: ["--warm-pool", String(pool)] });
  try {
    if (pool > 0) await waitWarmPool(s, pool);
    const ms = await sdkRun<number[]>(SDK_ROUNDS, [n, pauseMs], s.sdkEnv);
    return { ms, claimed: (await createCounts(s)).pool };
  } finally {
    await s.stop();
  }
}

/** Scenario 10: Sandbox.create() to the first command through the published SDK, beside runc run of the same rootfs. */
export const sandboxCreate: Scenario = {
  id: ID,
  title: "sandboxd: Sandbox.create() → first commands.run('true') → kill, vs runc run of the same rootfs",
  async run(ctx: BenchContext): Promise<Row[]> {
    needSandboxes(ctx);
    const n = ctx.quick ? 3 : 50;
    const idle = ctx.quick ? 3 : 50;
    const pooled = await rounds(n, POOL);
    const spaced = await rounds(ctx.quick ? 2 : 20, POOL, SPACED_MS);
    const cold = await rounds(n, 0);
    const bare = await bareRuncTrue(n);
    const rows: Row[] = [];
    for (const p of [50, 95]) {
      rows.push(compared({
        scenario: ID, metric: `create → first command, warm pool of ${POOL}, p${p} (${n} sandboxes in a row; ${pooled.claimed} claimed from the pool)`, value: percentile(pooled.ms, p), unit: "ms",
        baseline: percentile(bare, p), baselineLabel: "runc run true, same rootfs",
        target: p === 50 ? { text: "≤ 300 ms and ≤ 2×", met: (r) => r.value <= 300 && r.ratio <= 2 } : undefined,
      }));
    }
    for (const p of [50, 95]) {
      rows.push(compared({
        scenario: ID, metric: `create → first command, warm pool of ${POOL}, creates ${SPACED_MS / 1000} s apart, p${p} (${spaced.ms.length} sandboxes; ${spaced.claimed} claimed)`, value: percentile(spaced.ms, p), unit: "ms",
        baseline: percentile(bare, p), baselineLabel: "runc run true, same rootfs",
      }));
    }
    for (const p of [50, 95]) {
      rows.push(compared({
        scenario: ID, metric: `create → first command, no pool (cold start), p${p} (${n} sandboxes)`, value: percentile(cold.ms, p), unit: "ms",
        baseline: percentile(bare, p), baselineLabel: "runc run true, same rootfs",
      }));
    }
    const s = await startSandboxd();
    try {
      // Idle footprint: sandboxd's own RSS before and with `idle` sandboxes, and what each costs.
      const pid = Number(execFileSync("pgrep", ["-o", "-f", `serve.*${s.dataDir}`], { encoding: "utf8" }).trim());
      const before = rssMiB(pid);
      const holder = sdkChild(SDK_HOLD, [idle], s.sdkEnv);
      let out = "";
      holder.stdout.on("data", (c: Buffer) => (out += c));
      await new Promise<void>((resolve, reject) => {
        holder.stdout.on("data", () => out.includes("]") && resolve());
        holder.on("exit", (code) => reject(new Error(`holder exited ${code}`)));
      });
      await new Promise((r) => setTimeout(r, 5000));
      const ids = JSON.parse(out.trim().split("\n").pop()!) as string[];
      const perSandbox = ids.map((id) => cgroupMemoryMiB(id)).filter((x) => Number.isFinite(x));
      const withIdle = rssMiB(pid);
      holder.stdin.end();
      await new Promise((r) => holder.on("exit", r));
      rows.push(single(ID, `sandboxd RSS with ${idle} idle sandboxes`, withIdle, "MiB", undefined, `${before.toFixed(0)} MiB with none`));
      rows.push(single(ID, "memory charged per idle sandbox (cgroup, median)", percentile(perSandbox, 50), "MiB", undefined, `${perSandbox.length} sandboxes; Go envd publishes 16 MiB for envd alone`));
      return rows;
    } finally {
      await s.stop();
    }
  },
};

/** memory.usage_in_bytes (v1) or memory.current (v2) of a sandbox's cgroup, found by its ID. */
function cgroupMemoryMiB(id: string): number {
  const found = execFileSync("find", ["/sys/fs/cgroup", "-maxdepth", "4", "-type", "d", "-name", id], { encoding: "utf8" }).split("\n").filter(Boolean);
  for (const dir of found) {
    for (const f of ["memory.usage_in_bytes", "memory.current"]) {
      try {
        return Number(readFileSync(join(dir, f), "utf8")) / 2 ** 20;
      } catch {
        // not the memory controller's directory
      }
    }
  }
  return NaN;
}

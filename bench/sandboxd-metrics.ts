/**
 * sandboxd's metrics costs: (1) the team metrics query over 7 days of 5 s samples (raw, the worst
 * case, and as the compaction leaves them), (2) the CPU sandboxd spends polling 100 sandboxes'
 * envd /metrics every 5 s. The 100 envds are one child process serving envd's /metrics body on 100
 * loopback ports, so only the poller's side (HTTP over kept-alive connections, JSON, SQLite
 * inserts) is measured in this process.
 *
 *   npx tsc -p tsconfig.test.json && node_modules/.bin/node build/bench/sandboxd-metrics.js [--seconds 60]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createLogger } from "../src/sandboxd/log.js";
import { createEnvdPoller } from "../src/sandboxd/metrics/envd-poller.js";
import { teamSeries } from "../src/sandboxd/metrics/team-query.js";
import { createTeamSampler } from "../src/sandboxd/metrics/team-sampler.js";
import { openStore, type Store } from "../src/sandboxd/store/store.js";

const DAY = 86400;
const SANDBOXES = 100;

/** Median of the wall times of `n` runs of `fn`, ms. */
function medianMs(n: number, fn: () => unknown): number {
  const t: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    fn();
    t.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return t.sort((a, b) => a - b)[Math.floor(n / 2)];
}

/** Query time of the default 7-day range over 7 days of 5 s samples, raw and compacted. */
function queryBench(dir: string): { raw: number; compacted: number; rowsRaw: number; rowsCompacted: number } {
  const store = openStore(join(dir, "q.db"));
  store.teams.insert({ id: "t", name: "t", maxConcurrent: 100, maxLengthHours: 24 });
  const end = 1_700_000_100;
  const start = end - 7 * DAY;
  store.transaction(() => {
    for (let ts = start; ts <= end; ts += 5) store.teamMetrics.record("t", ts, (ts / 5) % 37, ts % 60 === 0 ? 1 : 0);
  });
  const range = { start, end };
  const rowsRaw = store.teamMetrics.count();
  const raw = medianMs(21, () => teamSeries(store.teamMetrics, "t", range));
  const sampler = createTeamSampler({ store, log: createLogger("silent"), retentionS: 7 * DAY, clock: () => end * 1000 });
  sampler.maintain();
  const rowsCompacted = store.teamMetrics.count();
  const compacted = medianMs(21, () => teamSeries(store.teamMetrics, "t", range));
  store.close();
  return { raw, compacted, rowsRaw, rowsCompacted };
}

/** The fake envds: one child process, SANDBOXES servers answering /metrics like envd; resolves with their ports. */
function startEnvds(): Promise<{ ports: number[]; stop(): void }> {
  const script = `
    const http = require("node:http");
    const body = () => JSON.stringify({ ts: Math.floor(Date.now() / 1000), cpu_count: 2, cpu_used_pct: 12.5, mem_total: 536870912, mem_used: 123456789,
      mem_cache: 2345678, mem_total_mib: 512, mem_used_mib: 117, disk_total: 10737418240, disk_used: 1234567890 }) + "\\n";
    const ports = [];
    let n = 0;
    for (let i = 0; i < ${SANDBOXES}; i++) {
      const srv = http.createServer({ keepAliveTimeout: 640000 }, (req, res) => { const b = body(); res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(b) }); res.end(b); });
      srv.listen(0, "127.0.0.1", () => { ports[i] = srv.address().port; if (++n === ${SANDBOXES}) console.log(JSON.stringify(ports)); });
    }`;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (c: Buffer) => {
      out += c;
      if (out.includes("\n")) resolve({ ports: JSON.parse(out) as number[], stop: () => child.kill("SIGKILL") });
    });
    child.once("exit", () => reject(new Error("the fake envds exited")));
  });
}

/** CPU share of one core this process spends polling SANDBOXES envds every 5 s for `seconds`. */
async function pollBench(dir: string, seconds: number): Promise<{ pctOfCore: number; rounds: number; requests: number; failures: number }> {
  const envds = await startEnvds();
  const store: Store = openStore(join(dir, "p.db"));
  try {
    store.teams.insert({ id: "t", name: "t", maxConcurrent: 1000, maxLengthHours: 24 });
    store.settings.set("install_secret", "00".repeat(32));
    const now = new Date().toISOString();
    envds.ports.forEach((port, i) =>
      store.sandboxes.insert({
        id: `ibench${String(i).padStart(15, "0")}`, teamID: "t", templateID: "x", state: "running", startedAt: now, endAt: now, metadata: {}, autoPause: false,
        secure: true, trafficToken: null, network: {}, allowInternetAccess: true, ip: "127.0.0.1", envdPort: port, envdVersion: "0.6.13", cpuCount: 2, memoryMB: 512, diskSizeMB: 10240,
      }),
    );
    const poller = createEnvdPoller({ store, log: createLogger("silent") });
    await poller.poll(); // connections opened before the measurement
    const cpu0 = process.cpuUsage();
    const t0 = Date.now();
    poller.start();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const cpu = process.cpuUsage(cpu0);
    const wall = Date.now() - t0;
    poller.stop();
    const st = poller.stats();
    return { pctOfCore: ((cpu.user + cpu.system) / 1000 / wall) * 100, rounds: st.rounds, requests: st.requests, failures: st.failures };
  } finally {
    store.close();
    envds.stop();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { seconds: { type: "string" } } });
  const seconds = Number(values.seconds ?? "60");
  const dir = mkdtempSync(join(tmpdir(), "sandboxd-metrics-bench-"));
  try {
    const q = queryBench(dir);
    console.log(`team metrics, 7-day query: raw ${q.rowsRaw} rows ${q.raw.toFixed(1)} ms; compacted ${q.rowsCompacted} rows ${q.compacted.toFixed(1)} ms (median of 21)`);
    const p = await pollBench(dir, seconds);
    console.log(`envd polling, ${SANDBOXES} sandboxes every 5 s for ${seconds} s: ${p.pctOfCore.toFixed(2)} % of one core (${p.rounds} rounds, ${p.requests} requests, ${p.failures} failed)`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

void main();

#!/usr/bin/env node
// Start-to-healthy time and idle RSS of envd builds (bench scenario 6 input), e.g.
//   node scripts/package-measure.mjs dist/envd dist/envd-0.1.0-linux-x64/envd
// Each executable is started N times (ENVD_MEASURE_RUNS, default 15) on a free port; the time is
// from spawn to the first 204 of GET /health, with the CPU time used until then (steadier than wall
// time on a busy machine); RSS is VmRSS after 2 s idle (and after 20 requests).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const RUNS = Number(process.env.ENVD_MEASURE_RUNS ?? 15);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "::", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** CPU time (user + system) the process used so far, in ms (clock ticks are 10 ms on Linux). */
const cpuMs = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
};
const rssKb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN);

async function once(exe) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "envd-measure-"));
  const args = ["--port", String(port), "--clock", "off", "--run-dir", join(dir, "run"), "--hosts-file", join(dir, "hosts"), "--log-level", "warn"];
  const t0 = process.hrtime.bigint();
  const proc = spawn(exe, args, { stdio: "ignore", env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" } });
  try {
    for (;;) {
      try {
        const r = await fetch(`http://127.0.0.1:${port}/health`);
        if (r.status === 204) break;
      } catch {
        // not listening yet
      }
      if (proc.exitCode !== null) throw new Error(`${exe} exited with ${proc.exitCode}`);
      await sleep(2);
    }
    const healthyMs = Number(process.hrtime.bigint() - t0) / 1e6;
    const startCpuMs = cpuMs(proc.pid);
    await sleep(2000);
    const idle = rssKb(proc.pid);
    for (let i = 0; i < 20; i++) await (await fetch(`http://127.0.0.1:${port}/metrics`)).arrayBuffer();
    await sleep(500);
    return { healthyMs, startCpuMs, idleKb: idle, busyKb: rssKb(proc.pid) };
  } finally {
    proc.kill("SIGTERM");
    await new Promise((r) => (proc.exitCode !== null ? r() : proc.once("exit", r)));
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const exe of process.argv.slice(2)) {
  const rs = [];
  for (let i = 0; i < RUNS; i++) rs.push(await once(exe));
  const h = rs.map((r) => r.healthyMs);
  console.log(JSON.stringify({
    exe,
    runs: RUNS,
    healthyMsMedian: +median(h).toFixed(1),
    healthyMsMin: +Math.min(...h).toFixed(1),
    healthyMsMax: +Math.max(...h).toFixed(1),
    startCpuMsMedian: median(rs.map((r) => r.startCpuMs)),
    idleRssMbMedian: +(median(rs.map((r) => r.idleKb)) / 1024).toFixed(1),
    afterRequestsRssMbMedian: +(median(rs.map((r) => r.busyKb)) / 1024).toFixed(1),
  }));
}

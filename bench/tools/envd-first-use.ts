// envd's side of a warm create → first command, on the host without a sandbox: a fresh daemon
// (the release executable, or ENVD_BENCH_BIN) is readied as the warm pool readies one (/init with
// variables and no token, one `true` over HTTP/1.1), left idle (its quiet-second collection runs),
// then claimed as sandboxd and the SDK claim one: /init with a token, then `bash -l -c true`
// through Process/Start over h2c (Connect JSON, as the proxy relays the SDK's), three times on one
// session. Prints the medians of each step over DAEMONS daemons, ms.
// Usage: node build/bench/tools/envd-first-use.js [DAEMONS=7] [IDLE_MS=2500]
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect, type ClientHttp2Session } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { envdArtifactDir } from "../../test/sandboxd/helpers/sandboxd.js";
import { initEnvd } from "../../src/sandboxd/envd-client/init.js";
import { runCommand } from "../../src/sandboxd/envd-client/process.js";
import { envelope } from "../../src/sandboxd/envd-client/envelopes.js";
import { percentile } from "../lib/stats.js";

const daemons = Number(process.argv[2] ?? 7);
const idleMs = Number(process.argv[3] ?? 2500);
const BIN = process.env.ENVD_BENCH_BIN || join(envdArtifactDir(), "envd");
const USER = "user";
/** How the pool's warm-up command reaches envd: "h1" (sandboxd's client) or "h2" (h2c, as the proxy). */
const WARMUP = process.env.WARMUP ?? "h1";

/** Starts the daemon on a free port; resolves with its port and a stop function. */
async function start(): Promise<{ port: number; pid: number; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "envd-first-use-"));
  const args = ["--port", "0", "--host", "127.0.0.1", "--clock", "off", "--run-dir", join(dir, "run"), "--hosts-file", join(dir, "hosts"),
    "--ca-bundle", join(dir, "ca.crt"), "--ca-cert", join(dir, "e2b-ca.crt"), "--default-user", USER, "--log-level", "info"];
  const proc = spawn(BIN, args, { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  const port = await new Promise<number>((resolve, reject) => {
    proc.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.once("exit", (code) => reject(new Error(`${BIN} exited ${code} before listening`)));
  });
  const exited = new Promise((r) => proc.once("exit", r));
  return {
    port,
    pid: proc.pid!,
    async stop() {
      proc.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One Process/Start of `bash -l -c true` over the session, read to its end-of-stream frame; ms. */
function startOverH2(session: ClientHttp2Session, token: string): Promise<number> {
  const t0 = performance.now();
  const body = envelope({ process: { cmd: "/bin/bash", args: ["-l", "-c", "true"], envs: {} }, stdin: false });
  return new Promise((resolve, reject) => {
    const s = session.request({
      ":method": "POST", ":path": "/process.Process/Start", "content-type": "application/connect+json", "connect-protocol-version": "1",
      authorization: `Basic ${Buffer.from(`${USER}:`).toString("base64")}`, ...(token ? { "x-access-token": token } : {}),
    });
    s.on("data", () => undefined);
    s.on("end", () => resolve(performance.now() - t0));
    s.on("error", reject);
    s.end(body);
  });
}

const steps: Record<string, number[]> = {};
const add = (k: string, v: number) => (steps[k] ??= []).push(v);
/** CPU time of the daemon's main thread (its JavaScript), ms. */
const cpuMs = (pid: number) => Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1e6;
/** Runs one step, recording its wall time and the daemon's main-thread CPU time over it. */
async function step<T>(pid: number, name: string, fn: () => Promise<T>): Promise<T> {
  const c0 = cpuMs(pid);
  const t0 = performance.now();
  const v = await fn();
  add(`${name}: wall`, performance.now() - t0);
  add(`${name}: envd CPU`, cpuMs(pid) - c0);
  return v;
}
for (let i = 0; i < daemons; i++) {
  const d = await start();
  try {
    const t = { ip: "127.0.0.1", port: d.port };
    await step(d.pid, "pool /init", () => initEnvd({ ...t, envVars: { A: "1" } }));
    await step(d.pid, `pool warm-up run (${WARMUP})`, async () => {
      if (WARMUP !== "h2") return runCommand({ ...t, user: USER }, "true", 10_000);
      const s = connect(`http://127.0.0.1:${d.port}`);
      await startOverH2(s, "");
      s.close();
    });
    await step(d.pid, `idle ${idleMs} ms`, () => new Promise((r) => setTimeout(r, idleMs)));
    const status = readFileSync(`/proc/${d.pid}/status`, "utf8");
    for (const k of ["RssAnon", "RssFile"]) add(`idle ${k} before the claim (MiB)`, Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(status)?.[1]) / 1024);
    const token = `tok-${i}-${Date.now()}`;
    await step(d.pid, "claim /init (token)", () => initEnvd({ ...t, envVars: { A: "1", B: "2" }, accessToken: token }));
    const session = await step(d.pid, "h2c connect", async () => {
      const s = connect(`http://127.0.0.1:${d.port}`);
      await new Promise<void>((resolve, reject) => s.once("connect", () => resolve()).once("error", reject));
      return s;
    });
    for (const n of ["first", "second", "third"]) await step(d.pid, `${n} Start over h2c`, () => startOverH2(session, token));
    session.close();
  } finally {
    await d.stop();
  }
}
console.log(`${BIN}, ${daemons} daemons, idle ${idleMs} ms before the claim`);
for (const [k, xs] of Object.entries(steps)) console.log(`${k}\tp50 ${percentile(xs, 50).toFixed(1)}\tmin ${Math.min(...xs).toFixed(1)}\tmax ${Math.max(...xs).toFixed(1)}`);

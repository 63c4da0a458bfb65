import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { assertTestRange } from "./net-range.js";
import { sweepAll } from "./sweep.js";

/** The repository root (this file is build/test/sandboxd/helpers/sandboxd.js once compiled). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");
/** The Node 24 that sandboxd runs on. */
export const NODE = join(ROOT, "node_modules", ".bin", "node");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const ENVD_ARTIFACT = join(ROOT, "dist", `envd-${VERSION}-linux-${process.arch}`);
const NETS = join(tmpdir(), "sandboxd-test-nets");

/** A sandboxd started for a test, and how to reach and stop it. */
export interface Sandboxd {
  port: number;
  /** The E2B_DOMAIN value: "e2b.localhost:<port>". */
  domain: string;
  apiUrl: string;
  apiKey: string;
  caFile: string;
  dataDir: string;
  /** E2B_DOMAIN and NODE_EXTRA_CA_CERTS as sandboxd printed them, E2B_API_KEY as printed or, after the first start, as its key file holds it. */
  sdkEnv: Record<string, string>;
  /** Everything sandboxd wrote (stdout, then stderr's JSON log lines). */
  logs(): string;
  /** Signals sandboxd and waits for it to exit; resolves with its exit code (null: killed by a signal). Leaves sandboxes and data. */
  terminate(signal?: NodeJS.Signals): Promise<number | null>;
  /** Kills every sandbox it made (through the API), stops it, removes a data dir it made, frees its network range. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Network ranges this process holds, by data dir; released at exit whatever happened. */
const held = new Map<string, { cidr: string; release(): void }>();
process.once("exit", () => {
  for (const net of held.values()) net.release();
});

/** The instances this process started and has not stopped. */
const live = new Set<Sandboxd>();

/**
 * Stops every instance this process started and has not stopped (its sandboxes killed, its host
 * state swept): for a bench or script told to end mid-run, so no sandboxd outlives it.
 */
export async function stopAll(): Promise<void> {
  await Promise.allSettled([...live].map((s) => s.stop()));
}

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** Whether a process is alive. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Takes a /24 of 198.18.0.0/16 no other live test process holds (a lock directory per range);
 * 198.19.0.0/16 holds the fixed ranges some test files name. Nothing else on the machine may use
 * the range taken: one in use (a leftover, or a run that takes ranges without this lock) is
 * skipped with a warning on stderr.
 */
function takeNetwork(): { cidr: string; release(): void } {
  mkdirSync(NETS, { recursive: true });
  for (let n = 0; n < 200; n++) {
    const dir = join(NETS, String(n));
    try {
      mkdirSync(dir);
    } catch {
      const owner = Number(readFileSync(join(dir, "pid"), "utf8").trim() || "0");
      if (owner > 0 && alive(owner)) continue;
      rmSync(dir, { recursive: true, force: true });
      try {
        mkdirSync(dir);
      } catch {
        continue;
      }
    }
    writeFileSync(join(dir, "pid"), String(process.pid));
    const cidr = `198.18.${n}.0/24`;
    const release = () => rmSync(dir, { recursive: true, force: true });
    try {
      assertTestRange(cidr, "a test sandboxd");
    } catch (err) {
      // another run on this machine that takes its range without this lock: say so, and try the next
      release();
      process.stderr.write(`test sandboxd: skipping ${cidr}: ${(err as Error).message}\n`);
      continue;
    }
    return { cidr, release };
  }
  throw new Error("no free 198.18.<n>.0/24 for a test sandboxd (ranges in use are named on stderr)");
}

/** The envd release artifact directory, built once (under a lock, for parallel test files) when missing. */
export function envdArtifactDir(): string {
  if (process.env.SANDBOXD_TEST_ENVD_DIR) return process.env.SANDBOXD_TEST_ENVD_DIR;
  if (existsSync(join(ENVD_ARTIFACT, "envd"))) return ENVD_ARTIFACT;
  const lock = join(ROOT, "dist", ".envd-artifact.lock");
  mkdirSync(join(ROOT, "dist"), { recursive: true });
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      spawnSync("sleep", ["1"]);
      if (existsSync(join(ENVD_ARTIFACT, "envd"))) return ENVD_ARTIFACT;
    }
  }
  try {
    const r = spawnSync(NODE, [join(ROOT, "scripts", "package-sea.mjs")], { cwd: ROOT, encoding: "utf8", timeout: 900_000 });
    if (r.status !== 0) throw new Error(`building the envd artifact failed:\n${r.stderr}`);
    return ENVD_ARTIFACT;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** One HTTPS request to sandboxd at 127.0.0.1 with `host` as Host and SNI; the status and body. */
export function call(port: number, ca: Buffer, host: string, path: string, opts: { method?: string; headers?: Record<string, string>; body?: unknown } = {}): Promise<{ status: number; body: string }> {
  const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  const headers = payload === undefined ? opts.headers : { "content-type": "application/json", ...opts.headers };
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: "127.0.0.1", port, path, method: opts.method ?? "GET", ca, servername: host, agent: false, headers: { host: `${host}:${port}`, ...headers } }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(payload);
  });
}

/** Why tests that make sandboxes cannot run here, or undefined when they can (runc and root). */
export function sandboxSkipReason(): string | undefined {
  if (process.getuid?.() !== 0) return "making sandboxes needs root";
  if (spawnSync("runc", ["--version"]).status !== 0) return "runc is not installed";
  return undefined;
}

/**
 * Starts `node dist/sandboxd serve` on a free port of 127.0.0.1 with its own data dir, network
 * range and no egress; waits until /health answers 200 (or, with `wait: "lines"`, until the
 * three lines are printed).
 */
export async function startSandboxd(opts: { dataDir?: string; env?: NodeJS.ProcessEnv; args?: string[]; wait?: "healthy" | "lines"; timeoutMs?: number } = {}): Promise<Sandboxd> {
  const ownDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "sandboxd-data-"));
  // Sandbox root (a mapped uid) must reach the data dir; mkdtemp makes it 0700.
  chmodSync(dataDir, 0o755);
  // A restart on the same data dir keeps the range its sandboxes have addresses in.
  const restart = held.get(dataDir);
  const net = restart ?? takeNetwork();
  held.set(dataDir, net);
  // a range a test names itself must be as free as a taken one (a restart finds its own sandboxes there)
  const named = opts.args?.[opts.args.lastIndexOf("--network-cidr") + 1];
  if (!restart && opts.args?.includes("--network-cidr") && named) {
    try {
      assertTestRange(named, "a test sandboxd");
    } catch (err) {
      net.release();
      held.delete(dataDir);
      throw err;
    }
  }
  const port = await freePort();
  const args = [
    join(ROOT, "dist", "sandboxd"), "serve",
    "--listen", `127.0.0.1:${port}`,
    "--domain", "e2b.localhost",
    "--data-dir", dataDir,
    "--network-cidr", net.cidr,
    "--egress-interface", "none",
    "--envd-dir", envdArtifactDir(),
    ...(opts.args ?? []),
  ];
  // No warm pool unless a test asks for one (`--warm-pool N`): pooled sandboxes would start beside
  // every test, and tests that count what exists on the host would see them.
  const child: ChildProcess = spawn(NODE, args, { env: { ...process.env, SANDBOXD_WARM_POOL: "0", ...opts.env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout!.on("data", (c: Buffer) => (out += c));
  child.stderr!.on("data", (c: Buffer) => (err += c));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  let exitCode: number | null | undefined;
  void exited.then((c) => (exitCode = c));
  const logs = () => `--- stdout\n${out}--- stderr\n${err}`;

  const deadline = Date.now() + (opts.timeoutMs ?? 600_000);
  const line = (name: string) => new RegExp(`^${name}=(.*)$`, "m").exec(out)?.[1];
  while (!line("NODE_EXTRA_CA_CERTS")) {
    if (exitCode !== undefined || Date.now() > deadline) {
      child.kill("SIGKILL");
      net.release();
      held.delete(dataDir);
      if (ownDir) rmSync(dataDir, { recursive: true, force: true });
      throw new Error(`sandboxd did not print its lines (exit ${exitCode}):\n${logs()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  // The key is printed only by the start that made it; later starts leave it in <data dir>/api-key.
  const apiKey = line("E2B_API_KEY") ?? readFileSync(join(dataDir, "api-key"), "utf8").trim();
  const sdkEnv = { E2B_DOMAIN: line("E2B_DOMAIN")!, E2B_API_KEY: apiKey, NODE_EXTRA_CA_CERTS: line("NODE_EXTRA_CA_CERTS")! };
  const ca = readFileSync(sdkEnv.NODE_EXTRA_CA_CERTS);

  const terminate = async (signal: NodeJS.Signals = "SIGTERM") => {
    if (exitCode === undefined) child.kill(signal);
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    const code = await exited;
    clearTimeout(timer);
    return code;
  };
  const sandboxd: Sandboxd = {
    port,
    domain: sdkEnv.E2B_DOMAIN,
    apiUrl: `https://api.${sdkEnv.E2B_DOMAIN}`,
    apiKey: sdkEnv.E2B_API_KEY,
    caFile: sdkEnv.NODE_EXTRA_CA_CERTS,
    dataDir,
    sdkEnv,
    logs,
    terminate,
    async stop(signal = "SIGTERM") {
      live.delete(sandboxd);
      if (exitCode === undefined) await killAll(port, ca, sdkEnv.E2B_API_KEY);
      const code = await terminate(signal);
      await sweepAll(dataDir, net.cidr, envdArtifactDir());
      net.release();
      held.delete(dataDir);
      if (ownDir) rmSync(dataDir, { recursive: true, force: true });
      return code;
    },
  };
  live.add(sandboxd);
  if (opts.wait === "lines") return sandboxd;
  for (;;) {
    const health = await call(port, ca, "api.e2b.localhost", "/health").catch(() => ({ status: 0, body: "" }));
    if (health.status === 200) return sandboxd;
    if (exitCode !== undefined || Date.now() > deadline) {
      await sandboxd.stop("SIGKILL");
      throw new Error(`sandboxd did not become healthy (last /health: ${health.status} ${health.body}):\n${logs()}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Kills every sandbox of the default team through the API (best effort: a sandboxd that is not ready has none). */
async function killAll(port: number, ca: Buffer, apiKey: string): Promise<void> {
  const headers = { "x-api-key": apiKey };
  const list = await call(port, ca, "api.e2b.localhost", "/v2/sandboxes?state=running,paused&limit=100", { headers }).catch(() => undefined);
  if (list?.status !== 200) return;
  for (const s of JSON.parse(list.body) as { sandboxID: string }[]) {
    await call(port, ca, "api.e2b.localhost", `/sandboxes/${s.sandboxID}`, { method: "DELETE", headers }).catch(() => undefined);
  }
}

/** The warm pool's ready sandboxes as sandboxd's /metrics reports them, summed over templates. */
export async function warmPoolReady(s: Sandboxd): Promise<number> {
  const r = await call(s.port, readFileSync(s.caFile), "api.e2b.localhost", "/metrics", { headers: { "x-api-key": s.apiKey } });
  if (r.status !== 200) throw new Error(`GET /metrics answered ${r.status}: ${r.body}`);
  return [...r.body.matchAll(/^sandboxd_warm_pool_ready\{[^}]*\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
}

/** Waits until the warm pool holds `n` ready sandboxes (rejects after `ms`). */
export async function waitWarmPool(s: Sandboxd, n: number, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const ready = await warmPoolReady(s);
    if (ready >= n) return;
    if (Date.now() > deadline) throw new Error(`the warm pool held ${ready} of ${n} sandboxes after ${ms} ms:\n${s.logs().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

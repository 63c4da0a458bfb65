/**
 * Starts sandboxd's system tools off its main thread: through envd's native addon when it was
 * loaded (native-spawn.ts: no fork at all), else from worker threads. libuv's spawn blocks the
 * calling thread until the child has exec'd; on a loaded 2-core host that is 15–40 ms a tool,
 * and on the main thread every tool a create, a refill or a kill ran stalled the API and the
 * proxy for that long. A worker blocks instead; two let two tools start at once.
 */
import { SHARE_ENV, Worker } from "node:worker_threads";
import { nativeSpawn, nativeSpawnLoaded } from "./native-spawn.js";
import type { SpawnRequest, SpawnResult } from "./spawn-types.js";


// Plain JavaScript run with `eval`: the same source works from the bundle and from tsc's output,
// and as a script or a module (an eval'd worker takes its type from the process's flags).
const WORKER_SOURCE = `
const { parentPort } = process.getBuiltinModule("node:worker_threads");
const { spawn } = process.getBuiltinModule("node:child_process");
const { setPriority } = process.getBuiltinModule("node:os");
parentPort.on("message", (m) => {
  let sent = false;
  const done = (r) => { if (!sent) { sent = true; parentPort.postMessage({ id: m.id, ...r }); } };
  let child;
  try {
    child = spawn(m.cmd, m.args, { cwd: m.cwd, stdio: m.fds ? ["ignore", m.fds[0], m.fds[1]] : ["pipe", "pipe", "pipe"], timeout: m.timeoutMs });
  } catch (err) {
    return done({ error: { code: err.code, message: err.message } });
  }
  if (m.nice && child.pid) { try { setPriority(child.pid, m.nice); } catch {} }
  let stdout = "", stderr = "";
  child.once("error", (err) => done({ error: { code: err.code, message: err.message } }));
  if (m.fds) return void child.once("exit", (code) => done({ code, stdout, stderr }));
  child.stdout.setEncoding("utf8").on("data", (d) => (stdout = (stdout + d).slice(-1000000)));
  child.stderr.setEncoding("utf8").on("data", (d) => (stderr = (stderr + d).slice(-64000)));
  child.once("close", (code) => done({ code, stdout, stderr }));
  child.stdin.on("error", () => {});
  child.stdin.end(m.input ?? "");
});`;

interface Answer {
  id: number;
  code?: number | null;
  stdout?: string;
  stderr?: string;
  error?: { code?: string; message: string };
}

interface Pending {
  resolve(r: SpawnResult): void;
  reject(err: Error): void;
  cmd: string;
}

/** A worker and the runs it has not answered yet. */
class SpawnWorker {
  private readonly worker: Worker;
  readonly pending = new Map<number, Pending>();
  dead = false;

  constructor() {
    this.worker = new Worker(WORKER_SOURCE, { eval: true, env: SHARE_ENV, name: "sandboxd-spawner" });
    this.worker.on("message", (a: Answer) => this.answer(a));
    const fail = (err: Error) => {
      this.dead = true;
      for (const p of this.pending.values()) p.reject(new Error(`the tool runner stopped: ${err.message}`));
      this.pending.clear();
    };
    this.worker.on("error", fail);
    this.worker.on("exit", (code) => fail(new Error(`exit ${code}`)));
    // after the listeners: adding a message listener refs the worker's port again
    this.worker.unref();
  }

  run(id: number, req: SpawnRequest, p: Pending): void {
    if (this.pending.size === 0) this.worker.ref();
    this.pending.set(id, p);
    this.worker.postMessage({ id, ...req });
  }

  private answer(a: Answer): void {
    const p = this.pending.get(a.id);
    if (!p) return;
    this.pending.delete(a.id);
    if (this.pending.size === 0) this.worker.unref();
    if (a.error) {
      const err = a.error.code === "ENOENT" ? new Error(`${p.cmd} is not installed (see the runtime's Debian packages)`) : Object.assign(new Error(a.error.message), { code: a.error.code });
      return p.reject(err);
    }
    p.resolve({ code: a.code ?? null, stdout: a.stdout ?? "", stderr: a.stderr ?? "" });
  }
}

const WORKERS = 2;
const workers: SpawnWorker[] = [];
let nextId = 1;

/** Runs one tool (through the addon, else in the least busy worker); rejects only when it cannot be started. */
export function spawnTool(req: SpawnRequest): Promise<SpawnResult> {
  if (nativeSpawnLoaded()) return nativeSpawn(req);
  for (let i = workers.length - 1; i >= 0; i--) if (workers[i].dead) workers.splice(i, 1);
  while (workers.length < WORKERS) workers.push(new SpawnWorker());
  const w = workers.reduce((a, b) => (b.pending.size < a.pending.size ? b : a));
  return new Promise((resolve, reject) => w.run(nextId++, req, { resolve, reject, cmd: req.cmd }));
}

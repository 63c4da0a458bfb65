/**
 * Starting tools without forking sandboxd, through the native addon shipped with envd (its
 * spawn: a clone(CLONE_VM | CLONE_VFORK) child, as glibc's posix_spawn makes, watched by a
 * pidfd). Node's spawn forks the whole process, copying and then tearing down its page tables
 * before the exec: 15 ms a tool on a loaded 2-core VM, against about 1 ms this way.
 */
import { closeSync, openSync } from "node:fs";
import { createRequire } from "node:module";
import { Socket } from "node:net";
import type { SpawnRequest, SpawnResult } from "./spawn-types.js";

/** What sandboxd uses of the addon. */
interface Addon {
  spawn(file: string, argv: string[], envp: string[], cwd: string, uid: null, gid: null, fds: number[], setsid: boolean, onExit: (code: number, signal: number) => void, options?: { nice?: number }): number;
  spawnSupported(): boolean;
  pipe(capacity: number): [number, number, number];
}

let addon: Addon | undefined;
let devNull: number | undefined;

/**
 * Loads the addon at `file` for every later tool run; answers why it cannot be used (not found,
 * not loadable, or the kernel lacks pidfd_open) instead of throwing.
 */
export function loadSpawnAddon(file: string): string | undefined {
  try {
    const a = createRequire(file)(file) as Partial<Addon>;
    if (typeof a.spawn !== "function" || typeof a.pipe !== "function" || typeof a.spawnSupported !== "function") return "the addon has no spawn";
    if (!a.spawnSupported()) return "the kernel cannot watch a child's exit (pidfd_open)";
    addon = a as Addon;
    return undefined;
  } catch (err) {
    return (err as Error).message.split("\n")[0];
  }
}

/** Whether tools start through the addon. */
export function nativeSpawnLoaded(): boolean {
  return addon !== undefined;
}

/** Runs one tool through the addon; as the worker does, rejects only when it cannot be started. */
export function nativeSpawn(req: SpawnRequest): Promise<SpawnResult> {
  const a = addon!;
  return new Promise((resolve, reject) => {
    const opened: number[] = [];
    const pipe = (): [number, number] => {
      const [r, w] = a.pipe(0);
      opened.push(r, w);
      return [r, w];
    };
    let out: [number, number] | undefined;
    let err: [number, number] | undefined;
    let input: [number, number] | undefined;
    let pid: number;
    let exited: number | null | undefined;
    let open = 0;
    let timer: NodeJS.Timeout | undefined;
    let stdout = "";
    let stderr = "";
    const finish = () => {
      if (exited === undefined || open > 0) return;
      clearTimeout(timer);
      resolve({ code: exited, stdout, stderr });
    };
    try {
      devNull ??= openSync("/dev/null", "r");
      if (!req.fds) {
        out = pipe();
        err = pipe();
        input = pipe();
      }
      const fds = req.fds ? [devNull, req.fds[0], req.fds[1]] : [input![0], out![1], err![1]];
      const env = Object.entries(process.env).map(([k, v]) => `${k}=${v ?? ""}`);
      pid = a.spawn(req.cmd, [req.cmd, ...req.args], env, req.cwd ?? "", null, null, fds, false, (code, signal) => {
        exited = signal ? null : code;
        finish();
      }, req.nice ? { nice: req.nice } : undefined);
    } catch (e) {
      for (const fd of opened) closeQuietly(fd);
      const code = (e as NodeJS.ErrnoException).code;
      return reject(code === "ENOENT" ? new Error(`${req.cmd} is not installed (see the runtime's Debian packages)`) : Object.assign(new Error(`spawn ${req.cmd} ${code ?? (e as Error).message}`), { code }));
    }
    timer = setTimeout(() => {
      try {
        process.kill(pid, "SIGTERM");
      } catch {
        // already gone
      }
    }, req.timeoutMs);
    if (req.fds) return;
    // the child holds its own copies now
    for (const fd of [out![1], err![1], input![0]]) closeQuietly(fd);
    const read = (fd: number, add: (s: string) => void) => {
      open++;
      const s = new Socket({ fd, readable: true, writable: false });
      s.setEncoding("utf8");
      s.on("data", add);
      s.on("error", () => undefined);
      s.once("close", () => {
        open--;
        finish();
      });
    };
    read(out![0], (d) => (stdout = (stdout + d).slice(-1_000_000)));
    read(err![0], (d) => (stderr = (stderr + d).slice(-64_000)));
    const stdin = new Socket({ fd: input![1], readable: false, writable: true });
    stdin.on("error", () => undefined);
    stdin.end(req.input ?? "");
  });
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already closed
  }
}

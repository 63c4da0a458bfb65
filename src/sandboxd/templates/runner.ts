/**
 * A build step's command in a build sandbox: the user it runs as, looked up in the image, and
 * the run handed to the runtime's run-once verb.
 */
import { readFileInRoot } from "../host/in-root.js";
import type { Runtime } from "../runtime/runtime.js";

/** One command to run in a build sandbox over a mounted layer stack. */
export interface BuildCommand {
  /** The runtime the command runs in (its run-once verb). */
  runtime: Pick<Runtime, "runOnce">;
  /** Name of the run (unique per run). */
  id: string;
  /** The mounted overlay the command sees as `/`. */
  rootfs: string;
  memoryMB: number;
  argv: string[];
  /** User name or numeric uid[:gid], resolved in the rootfs's /etc/passwd. */
  user: string;
  env: Record<string, string>;
  cwd: string;
  /** Host directories bind-mounted read-only inside. */
  binds?: { source: string; destination: string }[];
  timeoutMs: number;
  signal?: AbortSignal;
  /** Each line the command prints (stdout and stderr). */
  onLine(line: string): void;
}

/** The CPUs a build step may use. */
const BUILD_CPU_COUNT = 2;
/** Most processes (and threads) a build step may have at once: a compiler's make -j forks many. */
const BUILD_PIDS_LIMIT = 4096;

/** The most of a rootfs's /etc/passwd read to look a user up. */
const MAX_PASSWD_BYTES = 4 << 20;

/** A user's uid, gid and home as the rootfs's /etc/passwd says; undefined when it has no such user. */
export function lookupUser(rootfs: string, user: string): { uid: number; gid: number; home: string } | undefined {
  const numeric = /^(\d+)(?::(\d+))?$/.exec(user);
  if (numeric) return { uid: Number(numeric[1]), gid: Number(numeric[2] ?? numeric[1]), home: "/" };
  let passwd: string;
  try {
    // resolved inside the rootfs without following links: a layer's etc could point at the host's
    passwd = readFileInRoot(rootfs, "etc/passwd", MAX_PASSWD_BYTES).toString("utf8");
  } catch {
    return undefined;
  }
  for (const line of passwd.split("\n")) {
    const f = line.split(":");
    if (f[0] === user && f.length >= 7) return { uid: Number(f[2]), gid: Number(f[3]), home: f[5] || "/" };
  }
  return undefined;
}

/**
 * Runs one command in a build sandbox through the runtime's run-once verb (isolated as a
 * sandbox, with the build's memory, only loopback for a network, its output as log lines), as
 * `user` with that user's HOME. Resolves with its exit code (null: killed); a timeout or an
 * abort kills it.
 */
export async function runInBuild(c: BuildCommand): Promise<number | null> {
  const who = lookupUser(c.rootfs, c.user);
  if (!who) throw new Error(`user '${c.user}' does not exist in the image`);
  const env = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME: who.home, USER: c.user, ...c.env };
  const r = await c.runtime.runOnce(
    {
      runID: c.id, rootfs: c.rootfs, argv: c.argv, user: { uid: who.uid, gid: who.gid }, env, cwd: c.cwd,
      cpuCount: BUILD_CPU_COUNT, memoryMB: c.memoryMB, pidsLimit: BUILD_PIDS_LIMIT, network: "loopback",
      binds: c.binds, timeoutMs: c.timeoutMs, onLine: c.onLine,
    },
    c.signal,
  );
  if (r.timedOut) c.onLine(`killed after ${Math.round(c.timeoutMs / 1000)} s`);
  return r.exitCode;
}

import { execFileSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { getPriority } from "node:os";
import { delimiter, join } from "node:path";
import { isApplicableId, type User } from "../auth/users.js";
import { addonExtra, type SpawnOptions } from "../platform/addon.js";

/** The helper programs the exec wrapper uses, found once at start (absent ones are skipped). */
export interface ExecTools {
  readonly sh: string;
  /** util-linux setpriv: sets uid, gid and supplementary groups before exec. */
  readonly setpriv?: string;
  /** `nice -n <delta>` prefix that resets the child's niceness to 0 (absent when already 0). */
  readonly nicePrefix: readonly string[];
  /** `ionice` prefix that resets the child's IO class (absent when envd's is already the default). */
  readonly ionicePrefix: readonly string[];
  /** envd's effective uid. */
  readonly euid: number;
  /** envd's own niceness (its unit sets -20) and whether its IO class is the default one. */
  readonly niceness: number;
  readonly ioDefault: boolean;
}

/** What to execute: a file, its arguments, and uid/gid options only when setpriv is unavailable. */
export interface ExecLine {
  readonly file: string;
  readonly args: string[];
  readonly uid?: number;
  readonly gid?: number;
  /** Set in the child by the native spawn (nativeLine): what the wrapper's steps would do. */
  readonly options?: SpawnOptions;
}

/** ioprio_set value of `ionice -c 2 -n 4`: best-effort class, priority 4. */
const IOPRIO_BEST_EFFORT_4 = (2 << 13) | 4;

// Runs as envd's user (root), so it may raise oom_score_adj and lower niceness, then execs
// the chain; every step execs, so the reported pid is the user command's. A missing command
// makes the last exec fail with exit code 127.
const SCRIPT = '{ echo 100 > /proc/self/oom_score_adj; } 2>/dev/null; exec "$@"';
const SCRIPT_UNSET_TERM = "unset TERM; " + SCRIPT;

/**
 * An id as Node's spawn and node-pty take it: a signed 32-bit integer, which both cast to the
 * unsigned uid_t (so 3000000000 goes as -1294967296). Throws for an id that cannot be applied
 * (2^32 - 1 would become -1, "keep root's"): plan() refuses such users before any spawn.
 */
export function int32Id(id: number | undefined): number | undefined {
  if (id === undefined) return undefined;
  if (!isApplicableId(id)) throw Object.assign(new Error(`id ${id} cannot be applied to a process`), { code: "EINVAL" });
  return id | 0;
}

/** Finds an executable on `path` (a PATH-style list); undefined when absent. */
export function which(name: string, path: string): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const file = join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here; keep looking
    }
  }
  return undefined;
}

/** Looks up setpriv, nice and ionice on envd's PATH (plus the usual system dirs). */
export function findExecTools(path = process.env.PATH ?? ""): ExecTools {
  const search = [path, "/usr/bin", "/bin", "/usr/sbin", "/sbin"].join(delimiter);
  const nice = which("nice", search);
  const ionice = which("ionice", search);
  const niceness = getPriority();
  let ioniceDefault = true;
  const prio = addonExtra("ioprioGet")?.();
  if (prio !== undefined && prio >= 0) {
    // what `ionice -p` prints as "none" (class 0) or "best-effort: prio 4", without a process
    ioniceDefault = prio >> 13 === 0 || prio === ((2 << 13) | 4);
  } else if (ionice) {
    try {
      const out = execFileSync(ionice, ["-p", String(process.pid)], { encoding: "utf8", timeout: 2000 });
      ioniceDefault = /^none|^best-effort: prio 4/.test(out.trim());
    } catch {
      ioniceDefault = true;
    }
  }
  return {
    sh: which("sh", "/bin:/usr/bin") ?? "/bin/sh",
    setpriv: which("setpriv", search),
    nicePrefix: nice && niceness !== 0 ? [nice, "-n", String(-niceness)] : [],
    ionicePrefix: ionice && !ioniceDefault ? [ionice, "-t", "-c", "2", "-n", "4"] : [],
    euid: process.geteuid?.() ?? 0,
    niceness,
    ioDefault: ioniceDefault,
  };
}

/**
 * The direct exec for the native spawn (spawner.ts), which does in the child itself what the
 * wrapper chain's steps do: oom_score_adj 100, niceness 0 and the best-effort IO class when envd
 * runs with others (its unit: -20, realtime), the user's ids and all its groups. One exec for
 * every user and every priority envd runs with.
 */
export function nativeLine(cmd: string, args: readonly string[], user: User, tools: ExecTools): ExecLine {
  const options: SpawnOptions = { oomScoreAdj: 100 };
  if (tools.niceness !== 0) options.nice = 0;
  if (!tools.ioDefault) options.ioprio = IOPRIO_BEST_EFFORT_4;
  if (tools.euid === user.uid && tools.euid !== 0) return { file: cmd, args: [...args], options };
  const groups = user.groups.length > 0 ? [...user.groups] : [user.gid];
  return { file: cmd, args: [...args], uid: user.uid, gid: user.gid, options: { ...options, groups } };
}

/**
 * The fast path: exec `cmd args` directly (one exec instead of three) when nothing the wrapper
 * does is needed: niceness and IO class are already the defaults and the user has no
 * supplementary groups beyond its primary one (libuv's uid/gid options then give the same
 * credentials). The caller sets oom_score_adj after the spawn and falls back to execLine when
 * the direct exec fails (so a missing command still ends with exit code 127).
 */
export function directLine(cmd: string, args: readonly string[], user: User, tools: ExecTools): ExecLine | undefined {
  if (tools.nicePrefix.length > 0 || tools.ionicePrefix.length > 0) return undefined;
  if (user.groups.some((g) => g !== user.gid)) return undefined;
  const sameUser = tools.euid === user.uid && tools.euid !== 0;
  return sameUser ? { file: cmd, args: [...args] } : { file: cmd, args: [...args], uid: user.uid, gid: user.gid };
}

/** Builds the command line that runs `cmd args` as `user` with reset OOM score, niceness and IO class. */
export function execLine(cmd: string, args: readonly string[], user: User, tools: ExecTools, unsetTerm = false): ExecLine {
  const chain = [...tools.nicePrefix, ...tools.ionicePrefix];
  let uid: number | undefined;
  let gid: number | undefined;
  const sameUser = tools.euid === user.uid && tools.euid !== 0;
  if (tools.setpriv && !sameUser) {
    const groups = user.groups.length > 0 ? user.groups : [user.gid];
    chain.push(tools.setpriv, "--reuid", String(user.uid), "--regid", String(user.gid), "--groups", groups.join(","), "--");
  } else if (!sameUser) {
    uid = user.uid;
    gid = user.gid;
  }
  const script = unsetTerm ? SCRIPT_UNSET_TERM : SCRIPT;
  return { file: tools.sh, args: ["-c", script, "envd-exec", ...chain, cmd, ...args], uid, gid };
}

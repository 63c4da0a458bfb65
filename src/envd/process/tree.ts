import { readdirSync, readFileSync } from "node:fs";

/** The process group and session ids of a pid from /proc/<pid>/stat; undefined when gone. */
function groupAndSession(pid: number): { pgid: number; sid: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses: parse after the last ')'.
  const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { pgid: Number(rest[2]), sid: Number(rest[3]) };
}

/** Process groups inside the session led by `sid` other than the leader's own (e.g. shell jobs). */
function otherGroupsInSession(sid: number): Set<number> {
  const groups = new Set<number>();
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return groups;
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    const ids = groupAndSession(Number(name));
    if (ids && ids.sid === sid && ids.pgid !== sid && ids.pgid > 0) groups.add(ids.pgid);
  }
  return groups;
}

function tryKill(target: number, signal: NodeJS.Signals): "ok" | "gone" | Error {
  try {
    process.kill(target, signal);
    return "ok";
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH" ? "gone" : (err as Error);
  }
}

/**
 * Sends `signal` to every process of the tree `pid` leads: its process group and, since
 * envd starts each process as a session leader, every other process group in its session
 * (job-control shells put background jobs there). Falls back to the single pid while it
 * has not been reaped (`reaped` false). Returns an error only when the signal could not be
 * delivered for a reason other than "gone".
 */
export function signalTree(pid: number, signal: NodeJS.Signals, reaped = false): Error | undefined {
  // Once reaped, the pid may belong to someone else: only the group id (kept reserved by
  // the kernel while any member lives) is still safe to use.
  if (reaped) {
    const group = tryKill(-pid, signal);
    return group === "ok" || group === "gone" ? undefined : group;
  }
  const ids = groupAndSession(pid);
  const leader = ids === undefined || ids.sid === pid;
  if (leader) for (const pgid of otherGroupsInSession(pid)) tryKill(-pgid, signal);
  const group = leader ? tryKill(-pid, signal) : "gone";
  if (group === "ok") return undefined;
  const single = tryKill(pid, signal);
  if (single === "ok" || single === "gone") return undefined;
  return single;
}

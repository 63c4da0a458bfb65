// Waiting for a daemon to come to rest after abuse, by the events that mark it rather than by a
// stretch of time: the sockets whose connection its clients closed are closed on its side too,
// and any other condition a test names (until).
import { readFileSync } from "node:fs";
import { procStats, sleep } from "./fuzz.js";

/** Inodes of the sockets the kernel lists in this network namespace, less TCP ones whose peer has closed (CLOSE_WAIT). */
function liveSocketInodes(): Set<string> {
  const live = new Set<string>();
  for (const table of ["tcp", "tcp6", "udp", "udp6", "raw", "raw6"]) {
    let text = "";
    try {
      text = readFileSync(`/proc/net/${table}`, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && !(table.startsWith("tcp") && f[3] === "08")) live.add(f[9]);
    }
  }
  for (const table of ["unix", "netlink", "packet"]) {
    let text = "";
    try {
      text = readFileSync(`/proc/net/${table}`, "utf8");
    } catch {
      continue;
    }
    const col = table === "unix" ? 6 : table === "netlink" ? 9 : 8;
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > col) live.add(f[col]);
    }
  }
  return live;
}

/**
 * The sockets `pid` still holds whose connection is over: the peer closed it (CLOSE_WAIT) or
 * reset it (the kernel no longer lists it). Empty once the process has handled every close.
 */
export function closedSocketsHeld(pid: number): string[] {
  const live = liveSocketInodes();
  return procStats(pid).fdTargets.filter((t) => {
    const m = /^socket:\[(\d+)\]$/.exec(t);
    return m !== null && !live.has(m[1]);
  });
}

/**
 * Waits until `done()` holds, checking after each turn of a short poll; `what` names the event
 * in the error thrown if it has not come after `failSafeMs` (a bound for a broken daemon, not a
 * measure of a working one).
 */
export async function until(done: () => boolean | Promise<boolean>, what: string, failSafeMs = 60_000): Promise<void> {
  const deadline = Date.now() + failSafeMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what}: still not the case after ${failSafeMs / 1000} s`);
    await sleep(20);
  }
}

/**
 * Whether a container's init still runs, read from /proc instead of from `runc list`. runc list
 * is a process start plus work per container (about 170 ms of CPU at 100 containers on a 2-core
 * VM), and the reconcile loop looks every few seconds. runc's own state file gives the init's pid
 * and start time (read again only when runc rewrites the file: a pause, a resume, a new
 * container under the same ID); each look after that reads one line of /proc/<pid>/stat and
 * compares the start time, so a pid the kernel gave to another process is not taken for the init.
 * The state file is runc's (host root writes it under sandboxd's data dir); nothing a sandbox
 * writes is read.
 */
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";

/** A container's init as runc recorded it, and which version of the state file said so. */
interface Init {
  pid: number;
  start: string;
  /** The state file's inode and change time when it was read. */
  version: string;
}

/** The state and start time (clock ticks after boot) of a process, or undefined when it is gone. */
export function procStat(pid: number): { state: string; start: string } | undefined {
  let line: string;
  try {
    line = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return undefined;
  }
  // the command name (field 2) is in parentheses and may hold spaces and parentheses itself
  const rest = line.slice(line.lastIndexOf(")") + 2).split(" ");
  // rest[0] is field 3 (state); field 22 (starttime) is rest[19]
  return rest.length > 19 ? { state: rest[0], start: rest[19] } : undefined;
}

/** Looks up containers' inits under one runc state root. */
export class InitWatch {
  private readonly inits = new Map<string, Init>();

  constructor(private readonly runcRoot: string) {}

  /**
   * True while the container's init runs (frozen counts as running); false when it exited or runc
   * has no such container. A state file that cannot be read whole counts as running: the next
   * look decides.
   */
  alive(id: string): boolean {
    const init = this.initOf(id);
    if (init === "unreadable") return true;
    if (!init) return false;
    const now = procStat(init.pid);
    return now !== undefined && now.start === init.start && now.state !== "Z" && now.state !== "X";
  }

  /** Drops what is known of a container (it was removed). */
  forget(id: string): void {
    this.inits.delete(id);
  }

  private initOf(id: string): Init | "unreadable" | undefined {
    const file = join(this.runcRoot, id, "state.json");
    let version: string;
    try {
      const st = statSync(file);
      version = `${st.ino}:${st.ctimeMs}`;
    } catch {
      this.inits.delete(id);
      return undefined;
    }
    const known = this.inits.get(id);
    if (known?.version === version) return known;
    try {
      const state = JSON.parse(readFileSync(file, "utf8")) as { init_process_pid?: unknown; init_process_start?: unknown };
      const pid = Number(state.init_process_pid);
      if (!Number.isSafeInteger(pid) || pid <= 0) return "unreadable";
      const init = { pid, start: String(state.init_process_start), version };
      this.inits.set(id, init);
      return init;
    } catch {
      // runc replaces the file by a rename, so this is a file it has not finished: look again next time
      return "unreadable";
    }
  }
}

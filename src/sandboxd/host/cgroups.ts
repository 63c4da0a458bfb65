/** The host's cgroup hierarchies (v1 and v2): finding a group, setting its CPU share, removing it. */
import { existsSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Mount points of every cgroup hierarchy (v1 controllers, the v2 unified tree) on this host. */
export function cgroupMounts(): string[] {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((line) => {
      const [pre, post] = line.split(" - ");
      const fstype = post?.split(" ")[0];
      return fstype === "cgroup" || fstype === "cgroup2" ? pre.split(" ")[4] : undefined;
    })
    .filter((m): m is string => !!m);
}

/** The cgroup directories of `path` (relative to each hierarchy's root) that exist now. */
export function existingCgroupDirs(path: string): string[] {
  return cgroupMounts()
    .map((m) => join(m, path))
    .filter((d) => {
      try {
        readFileSync(join(d, "cgroup.procs"));
        return true;
      } catch {
        return false;
      }
    });
}

/**
 * Removes the (empty) cgroup `path` from every hierarchy; runc normally does this itself, this
 * catches what a failed create or a crash left. Busy or missing directories are skipped.
 */
export function removeCgroup(path: string): void {
  for (const dir of existingCgroupDirs(path)) {
    try {
      rmdirSync(dir);
    } catch {
      // still has tasks (or already gone): a later sweep retries
    }
  }
}

/**
 * Sets the CPU share of cgroup `path` in place: cpu.shares on v1, cpu.weight on v2 (with runc's
 * conversion), a file write instead of a `runc update` process. Throws when no hierarchy has it.
 */
export function setCpuShares(path: string, shares: number): void {
  let done = false;
  for (const dir of existingCgroupDirs(path)) {
    for (const [file, value] of [["cpu.shares", shares], ["cpu.weight", 1 + Math.floor(((shares - 2) * 9999) / 262142)]] as const) {
      // cgroupfs refuses to create files: only the controller's own file is there to write
      if (!existsSync(join(dir, file))) continue;
      writeFileSync(join(dir, file), String(value));
      done = true;
    }
  }
  if (!done) throw new Error(`no cpu controller found for cgroup ${path}`);
}

/** The freezer control of cgroup `path`: v1's freezer.state where that controller is mounted, else v2's cgroup.freeze. */
function freezerOf(path: string): { v1: boolean; file: string } {
  for (const dir of existingCgroupDirs(path)) {
    if (existsSync(join(dir, "freezer.state"))) return { v1: true, file: join(dir, "freezer.state") };
  }
  for (const dir of existingCgroupDirs(path)) {
    if (existsSync(join(dir, "cgroup.freeze"))) return { v1: false, file: join(dir, "cgroup.freeze") };
  }
  throw new Error(`no freezer found for cgroup ${path}`);
}

/** Whether every task of cgroup `path` is frozen now. */
export function cgroupFrozen(path: string): boolean {
  const f = freezerOf(path);
  if (f.v1) return readFileSync(f.file, "utf8").trim() === "FROZEN";
  return /^frozen 1$/m.test(readFileSync(join(f.file, "..", "cgroup.events"), "utf8"));
}

/**
 * Freezes every task of cgroup `path` and resolves once the kernel says they are (a file write
 * and a few reads, where `runc pause` is a process start); rejects after `timeoutMs` with the
 * group thawed again.
 */
export async function freezeCgroup(path: string, timeoutMs = 5_000): Promise<void> {
  const f = freezerOf(path);
  writeFileSync(f.file, f.v1 ? "FROZEN" : "1");
  const deadline = Date.now() + timeoutMs;
  while (!cgroupFrozen(path)) {
    if (Date.now() > deadline) {
      thawCgroup(path);
      throw new Error(`cgroup ${path} did not freeze within ${timeoutMs} ms`);
    }
    // v1 reports FREEZING while tasks are still being stopped
    await new Promise((r) => setImmediate(r));
  }
}

/** Thaws every task of cgroup `path`. */
export function thawCgroup(path: string): void {
  const f = freezerOf(path);
  writeFileSync(f.file, f.v1 ? "THAWED" : "0");
}

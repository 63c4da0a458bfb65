import { readFileSync, rmdirSync } from "node:fs";
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

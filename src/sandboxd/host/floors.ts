/**
 * The host's floors: how much memory and data-dir disk are left above what the host, sandboxd and
 * its caches keep for themselves. Admission (sandboxes/budget.ts) and image pruning read them.
 */
import { readFileSync, statfsSync } from "node:fs";

const MiB = 2 ** 20;

/**
 * MiB of memory the kernel reports available now (MemAvailable: free memory and what can be
 * reclaimed), less what the host, sandboxd and the page cache keep (2 GiB or a tenth of RAM,
 * whichever is more); negative when the floor is already eaten into.
 */
export function memoryAvailableAboveFloorMB(meminfo = (): string => readFileSync("/proc/meminfo", "utf8")): number {
  const text = meminfo();
  const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? 0);
  const total = Math.floor(kib("MemTotal") / 1024);
  return Math.floor(kib("MemAvailable") / 1024) - Math.max(2048, Math.ceil(total / 10));
}

/**
 * MiB free on the data dir's filesystem now, less a floor kept for the host, the store and
 * template layers (5 GiB or a twentieth of the filesystem, whichever is more); negative when the
 * floor is already eaten into.
 */
export function diskFreeAboveFloorMB(dataDir: string): number {
  const st = statfsSync(dataDir);
  const free = Math.floor((Number(st.bavail) * Number(st.bsize)) / MiB);
  const size = Math.floor((Number(st.blocks) * Number(st.bsize)) / MiB);
  return free - Math.max(5120, Math.ceil(size / 20));
}

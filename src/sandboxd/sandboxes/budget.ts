import type { SandboxRow } from "../store/sandboxes.js";
import { Invalid, LimitExceeded } from "../errors.js";

/** Memory and disk, MiB. */
export interface Resources {
  memoryMB: number;
  diskMB: number;
}

/** The limits sandboxes are admitted against, MiB. */
export interface Budget {
  /**
   * What all sandboxes together (and the warm pool) may reserve on this host. Without a figure,
   * that resource is not reserved (memory limits and disks overcommit, as containers' do), and
   * `memoryFreeMB` / `diskFreeMB` decide from what the host has left.
   */
  host: Partial<Resources>;
  /** MiB free on the data dir's filesystem above the floor kept for the host, read at each admission (thin disks). */
  diskFreeMB?: () => number;
  /** MiB of memory available above the floor kept for the host, read at each admission (limits not reserved). */
  memoryFreeMB?: () => number;
  /** What one team's sandboxes may reserve; undefined: only the host budget applies. */
  team: Partial<Resources>;
  /** The most memory one sandbox may ask for. */
  maxSandboxMemoryMB: number;
}

const MiB = 2 ** 20;

/** What a new sandbox needs available above the host's floor when memory is not reserved (an idle sandbox uses ~15 MiB). */
export const FREE_MIN_MEMORY_MB = 256;

/** What a new sandbox needs free above the floor when disks are thin (its first writes, its console). */
export const THIN_MIN_FREE_MB = 1024;


/** What sandbox rows hold: each its disk, and its memory unless paused to disk (a frozen sandbox keeps its memory). */
export function reserved(rows: Iterable<SandboxRow>): Resources {
  const out = { memoryMB: 0, diskMB: 0 };
  for (const r of rows) {
    if (!r.onDisk) out.memoryMB += r.memoryMB;
    out.diskMB += r.diskSizeMB;
  }
  return out;
}

const add = (a: Resources, b: Resources): Resources => ({ memoryMB: a.memoryMB + b.memoryMB, diskMB: a.diskMB + b.diskMB });

/** Whether `need` more fits beside `used` within `limit` (a limit left undefined always fits). */
export function fits(used: Resources, need: Resources, limit: Partial<Resources>): boolean {
  const t = add(used, need);
  return (limit.memoryMB === undefined || t.memoryMB <= limit.memoryMB) && (limit.diskMB === undefined || t.diskMB <= limit.diskMB);
}

/**
 * Refuses (Invalid) a sandbox that could never be admitted: more memory than one sandbox may
 * have, or more memory or disk than the whole host or team budget.
 */
export function checkSize(b: Budget, templateID: string, need: Resources): void {
  if (need.memoryMB > b.maxSandboxMemoryMB) {
    throw new Invalid(`Template '${templateID}' asks for ${need.memoryMB} MiB of memory; this server allows at most ${b.maxSandboxMemoryMB} MiB per sandbox (--max-sandbox-memory-mb): rebuild the template with less memory`);
  }
  for (const [what, limit, scope] of [
    ["memory", b.host.memoryMB, "the host's sandbox memory budget"],
    ["disk", b.host.diskMB, "the host's sandbox disk budget"],
    ["memory", b.team.memoryMB, "the team's memory quota"],
    ["disk", b.team.diskMB, "the team's disk quota"],
  ] as const) {
    const n = what === "memory" ? need.memoryMB : need.diskMB;
    if (limit !== undefined && n > limit) throw new Invalid(`Template '${templateID}' asks for ${n} MiB of ${what}, more than ${scope} (${limit} MiB) allows any sandbox`);
  }
}

/**
 * Admits one more sandbox of `need` beside what the team's sandboxes (`team`) and all of the
 * host's (`host`, the warm pool included) reserve; throws LimitExceeded (the SDK's RateLimitError) naming
 * the resource that ran out.
 */
export function admit(b: Budget, host: Resources, team: Resources, need: Resources): void {
  const message = (scope: string, what: keyof Resources, used: Resources, limit: number) => {
    const noun = what === "memoryMB" ? "memory" : "disk";
    return `you have reached the maximum ${noun} for concurrent E2B sandboxes (${scope}: ${used[what]} of ${limit} MiB in use, this sandbox needs ${need[what]} MiB; paused sandboxes keep theirs unless paused to disk). Kill sandboxes, or pause them to disk, to free ${noun}`;
  };
  for (const what of ["memoryMB", "diskMB"] as const) {
    const t = b.team[what];
    if (t !== undefined && team[what] + need[what] > t) throw new LimitExceeded(message("the team's quota", what, team, t));
    const h = b.host[what];
    if (h !== undefined && host[what] + need[what] > h) throw new LimitExceeded(message("this host's sandbox budget", what, host, h));
  }
  const mem = b.host.memoryMB === undefined ? b.memoryFreeMB?.() : undefined;
  if (mem !== undefined && mem < FREE_MIN_MEMORY_MB) {
    throw new LimitExceeded(`you have reached the maximum memory for concurrent E2B sandboxes (this host has ${Math.max(0, mem)} MiB available above the floor kept for the host; a new sandbox needs ${FREE_MIN_MEMORY_MB} MiB). Kill or pause sandboxes to free memory`);
  }
  const free = b.host.diskMB === undefined ? b.diskFreeMB?.() : undefined;
  if (free !== undefined && free < THIN_MIN_FREE_MB) {
    throw new LimitExceeded(`you have reached the maximum disk for concurrent E2B sandboxes (this host's disk has ${Math.max(0, free)} MiB free above the floor kept for the host; a new sandbox needs ${THIN_MIN_FREE_MB} MiB). Kill sandboxes or free disk`);
  }
}

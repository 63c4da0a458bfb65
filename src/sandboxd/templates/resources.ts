import { invalid } from "../errors.js";

/** The disk a template's sandboxes get when it asks for no more free space. */
export const DEFAULT_DISK_MB = 10240;
/** The largest disk a sandbox may have (the runtime's own bound). */
const MAX_DISK_MB = 16 * 2 ** 20;

/** A template's resources: CPUs, memory and the size of its sandboxes' disk. */
export interface TemplateResources {
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
}

/**
 * The disk that leaves at least `minFreeDiskMb` free to a new sandbox: its writable layer starts
 * empty, so the disk only needs that much plus ext4's own share (under 2% with no reserved
 * blocks) and a margin; never smaller than the default.
 */
export function diskForFreeSpace(minFreeDiskMb: number): number {
  return Math.max(DEFAULT_DISK_MB, Math.ceil(minFreeDiskMb * 1.03) + 256);
}

/** What a template request asks for: CPUs, memory and the free disk space its sandboxes must have. */
export interface ResourceRequest {
  cpuCount?: number;
  memoryMB?: number;
  minFreeDiskMb?: number;
}

/**
 * Checks cpuCount and memoryMB as E2B does (1..32 vCPU, 1 or even; ≥ 128 MiB, even), and turns
 * `minFreeDiskMb` (the free space sandboxes must have after the build) into a disk size.
 */
export function resources(o: ResourceRequest): TemplateResources {
  const cpuCount = o.cpuCount ?? 2;
  const memoryMB = o.memoryMB ?? 1024;
  if (cpuCount < 1) throw invalid(`CPU count must be at least 1, got ${cpuCount}`);
  if (cpuCount > 32 || (cpuCount !== 1 && cpuCount % 2 !== 0)) throw invalid(`CPU count must be 1 or an even number up to 32, got ${cpuCount}`);
  if (memoryMB < 128) throw invalid(`memory must be at least 128 MiB, got ${memoryMB}`);
  if (memoryMB % 2 !== 0) throw invalid(`memory must be an even number of MiB, got ${memoryMB}`);
  const minFree = o.minFreeDiskMb ?? 0;
  if (minFree < 0) throw invalid(`minFreeDiskMb must be at least 0, got ${minFree}`);
  const diskSizeMB = diskForFreeSpace(minFree);
  if (diskSizeMB > MAX_DISK_MB) throw invalid(`minFreeDiskMb must be at most ${Math.floor((MAX_DISK_MB - 256) / 1.03)}, got ${minFree}`);
  return { cpuCount, memoryMB, diskSizeMB };
}

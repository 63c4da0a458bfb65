/** A sandbox's writable disk: an ext4 image loop-mounted on the host. */
import { closeSync, ftruncateSync, mkdirSync, openSync } from "node:fs";
import { mustExec } from "./exec.js";
import { unmount } from "./mounts.js";

/** Smallest writable layer a sandbox may have (ext4's own structures take a few MiB of it). */
export const MIN_DISK_MB = 32;

/**
 * Makes a sandbox's writable disk: a sparse file of `sizeMB` (blocks are taken only as the
 * sandbox writes) formatted ext4 with no reserved blocks, loop-mounted at `target`. The overlay's
 * upper and work directories live on it, so the sandbox's writes stop at ENOSPC on its own disk
 * instead of filling the host's.
 */
export async function mountDisk(p: { image: string; target: string; sizeMB: number; nice?: number }): Promise<void> {
  const fd = openSync(p.image, "wx", 0o600);
  try {
    ftruncateSync(fd, p.sizeMB * 2 ** 20);
  } finally {
    closeSync(fd);
  }
  await mustExec("mkfs.ext4", ["-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", p.image], { nice: p.nice });
  mkdirSync(p.target, { mode: 0o755 });
  // the loop device goes with the unmount (mount sets autoclear)
  await mustExec("mount", ["-o", "loop,nosuid,nodev,noatime", p.image, p.target], { nice: p.nice });
}

/**
 * Loop-mounts the ext4 disk image `image` (already formatted: a reflink of the storage pool's
 * golden image or of a snapshot) at `target`, made when missing. The loop device goes with the
 * unmount (mount sets autoclear).
 */
export async function mountDiskImage(p: { image: string; target: string; nice?: number }): Promise<void> {
  mkdirSync(p.target, { recursive: true, mode: 0o755 });
  await mustExec("mount", ["-o", "loop,nosuid,nodev,noatime", p.image, p.target], { nice: p.nice });
}

/** Unmounts the disk (and frees its loop device) when mounted. */
export function unmountDisk(target: string): Promise<void> {
  return unmount(target);
}

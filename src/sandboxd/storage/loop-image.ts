// The pool's loop-backed XFS image, for hosts whose own file system cannot reflink: a sparse
// file under the data dir formatted `mkfs.xfs -m reflink=1`, loop-mounted nosuid,nodev,noexec
// with private propagation, grown online with xfs_growfs. Mounted with `discard`, so the blocks
// of removed disks and snapshots are punched out of the image and go back to the host.
import { closeSync, existsSync, ftruncateSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, statfsSync, statSync, truncateSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { execTool, mustExec } from "../host/exec.js";
import { loopsBackedBy, loopsInUse, mountAt } from "./loops.js";

const MiB = 2 ** 20;

/** Smallest pool image (mkfs.xfs refuses file systems under 300 MB). */
export const MIN_POOL_MB = 1024;

/**
 * The pool image's size when no flag gives one: half of the host file system's free space at
 * the first start. The image is sparse, so the size is a ceiling, not a reservation; keeping
 * it at half of what is free makes the pool fill (ENOSPC inside it, a refused create) before
 * the host does (the loop device's writes fail and XFS shuts the pool down).
 */
export function defaultPoolSizeMB(dataDir: string): number {
  const s = statfsSync(dataDir);
  const half = Math.floor((s.bavail * s.bsize) / 2 / MiB);
  if (half < MIN_POOL_MB) throw new Error(`not enough free disk under ${dataDir} for a storage pool: half of the free space is ${half} MiB, the pool needs at least ${MIN_POOL_MB} MiB`);
  return half;
}

/** Removes image files a crash left half-made (`<image>.tmp-<pid>`). */
export function sweepImageTemporaries(image: string): string[] {
  const prefix = `${basename(image)}.tmp-`;
  const swept = readdirSync(dirname(image)).filter((n) => n.startsWith(prefix)).map((n) => join(dirname(image), n));
  for (const p of swept) rmSync(p, { force: true });
  return swept;
}

/** Makes the sparse pool image of `sizeMB` formatted XFS with reflink, under a temporary name renamed into place when done. */
export async function createPoolImage(image: string, sizeMB: number): Promise<void> {
  if (!Number.isInteger(sizeMB) || sizeMB < MIN_POOL_MB) throw new Error(`storage pool size ${sizeMB} MiB: give a whole number of at least ${MIN_POOL_MB}`);
  const tmp = `${image}.tmp-${process.pid}`;
  try {
    const fd = openSync(tmp, "wx", 0o600);
    try {
      ftruncateSync(fd, sizeMB * MiB);
    } finally {
      closeSync(fd);
    }
    await mustExec("mkfs.xfs", ["-q", "-m", "reflink=1", "-L", "sandboxd", tmp]);
    renameSync(tmp, image);
  } finally {
    rmSync(tmp, { force: true });
  }
}

/**
 * Mounts the pool image at `mountpoint` (made mode 0700) and returns its loop device. A mount of
 * this image already there (sandboxd stopped while disks were in use, or crashed) is kept; any
 * other mount there is refused.
 */
export async function mountPoolImage(image: string, mountpoint: string): Promise<{ device: string; reused: boolean }> {
  const current = mountAt(mountpoint);
  if (current) {
    if (current.fstype === "xfs" && loopsBackedBy(image).includes(current.source)) return { device: current.source, reused: true };
    throw new Error(`${mountpoint} has ${current.fstype} from ${current.source} mounted, not the storage pool image ${image}`);
  }
  mkdirSync(mountpoint, { recursive: true, mode: 0o700 });
  await mustExec("mount", ["-t", "xfs", "-o", "loop,nosuid,nodev,noexec,noatime,discard", image, mountpoint]);
  // mounts made in other namespaces after this one do not carry copies of the pool (which would keep it busy)
  await mustExec("mount", ["--make-private", mountpoint]);
  const mounted = mountAt(mountpoint);
  if (!mounted) throw new Error(`the storage pool image ${image} did not mount at ${mountpoint}`);
  return { device: mounted.source, reused: false };
}

/** Grows the mounted pool to `sizeMB` (image, loop device, then XFS, all online); false when it is already that large. XFS cannot shrink. */
export async function growPoolImage(image: string, device: string, mountpoint: string, sizeMB: number): Promise<boolean> {
  if (sizeMB * MiB <= statSync(image).size) return false;
  truncateSync(image, sizeMB * MiB);
  await mustExec("losetup", ["--set-capacity", device]);
  await mustExec("xfs_growfs", [mountpoint]);
  return true;
}

/** Unmounts the pool and waits for its loop device to go; false, and left mounted, while disks of it are still in use. */
export async function unmountPoolImage(image: string, mountpoint: string): Promise<boolean> {
  if (!mountAt(mountpoint)) return true;
  // disks unmounted just before still hold the pool until the kernel releases their loop devices
  if ((await loopsInUse(mountpoint, { under: true })).length > 0) return false;
  await execTool("umount", [mountpoint]);
  if (mountAt(mountpoint)) return false;
  await loopsInUse(image);
  return true;
}

/** Whether a pool image exists at `image`. */
export function hasPoolImage(image: string): boolean {
  return existsSync(image);
}

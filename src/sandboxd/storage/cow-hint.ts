// XFS's copy-on-write extent size hint for the pool's images. A write into a block an image
// shares makes XFS reserve a whole CoW extent around it (32 blocks, 128 KiB, by default) and
// allocate all of it at writeback; what the write did not use stays allocated until XFS's
// background collection drops it (about half an hour). A sandbox disk's own writes to shared
// blocks are mostly single ext4 metadata blocks spread over the disk (journal, bitmaps, inode
// tables), so each would cost 128 KiB for 4: the pool's images get a hint of one block instead.
import { statfsSync } from "node:fs";
import { execTool } from "../host/exec.js";

/** statfs's magic number of XFS. */
const XFS_MAGIC = 0x58465342;

/** The CoW extent size hint the pool's images get: one 4 KiB block. */
export const COW_EXTENT_BYTES = 4096;

/**
 * Sets the CoW extent size hint of directory `dir` to COW_EXTENT_BYTES when it is on XFS: files
 * made in it after (clones included) inherit it. Elsewhere (btrfs) it does nothing. Returns
 * whether the hint is set.
 */
export async function setCowExtentHint(dir: string): Promise<boolean> {
  if (statfsSync(dir).type !== XFS_MAGIC) return false;
  const r = await execTool("xfs_io", ["-c", `cowextsize ${COW_EXTENT_BYTES}`, dir]);
  if (r.code !== 0) throw new Error(`xfs_io cowextsize on ${dir} failed: ${(r.stderr.trim() || r.stdout.trim()).slice(-500)}`);
  return true;
}

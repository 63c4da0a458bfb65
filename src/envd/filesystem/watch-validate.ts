import { stat, statfs } from "node:fs/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { fsError, goError } from "./go-error.js";

/** statfs magic numbers of filesystems whose changes inotify cannot see (NFS, CIFS, SMB, SMB2, FUSE). */
export const NETWORK_FS_MAGIC: ReadonlyMap<number, string> = new Map([
  [0x6969, "nfs"],
  [0xff534d42, "cifs"],
  [0x517b, "smb"],
  [0xfe534d42, "smb2"],
  [0x65735546, "fuse"],
]);

/** True when a statfs `type` names a network (or FUSE) filesystem. */
export function isNetworkFs(type: number): boolean {
  return NETWORK_FS_MAGIC.has(type >>> 0);
}

/**
 * The checks WatchDir and CreateWatcher make before arming (envd-behaviour §6.6): an existing
 * directory (missing → not_found, a file → invalid_argument), not on a network filesystem
 * unless allowed. The reference's "%!w(<nil>)" artefact is deliberately left out of the message.
 */
export async function validateWatchPath(path: string, allowNetworkMounts: boolean): Promise<void> {
  let st;
  try {
    st = await stat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      throw new ConnectError(`path ${path} not found: ${goError(err)}`, Code.NotFound, undefined, undefined, err);
    }
    throw fsError(`error statting path ${path}`, err);
  }
  if (!st.isDirectory()) throw new ConnectError(`path ${path} not a directory`, Code.InvalidArgument);
  if (allowNetworkMounts) return;
  let fs;
  try {
    fs = await statfs(path);
  } catch (err) {
    throw fsError(`error statting filesystem of ${path}`, err);
  }
  if (isNetworkFs(fs.type)) throw new ConnectError(`cannot watch path on network filesystem: ${path}`, Code.InvalidArgument);
}

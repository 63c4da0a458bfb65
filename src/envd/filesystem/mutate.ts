import { rename, rm, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import type { EntryInfo } from "../gen/filesystem/filesystem_pb.js";
import type { User } from "../auth/users.js";
import { ensureDirs } from "../auth/paths.js";
import { entryInfo, type NameLookup } from "./entry-info.js";
import { fsError, goError } from "./go-error.js";

function internal(message: string, err: unknown): ConnectError {
  if (err instanceof ConnectError) return new ConnectError(`${message}: ${err.rawMessage}`, Code.Internal, undefined, undefined, err);
  return fsError(message, err);
}

/** MakeDir (§6.2): already_exists for a directory, invalid_argument for a non-directory, else create with parents. */
export async function makeDir(path: string, user: User, names: NameLookup): Promise<EntryInfo> {
  try {
    const st = await stat(path);
    if (st.isDirectory()) throw new ConnectError(`directory already exists: ${path}`, Code.AlreadyExists);
    throw new ConnectError(`path already exists but it is not a directory: ${path}`, Code.InvalidArgument);
  } catch (err) {
    if (err instanceof ConnectError) throw err;
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw internal("error getting file info", err);
  }
  try {
    await ensureDirs(path, user.uid, user.gid);
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.ResourceExhausted) throw err;
    throw internal("error creating directory", err);
  }
  return entryInfo(path, names);
}

/** Move (§6.3): one rename(2) after creating the destination's parents; missing source → not_found. */
export async function move(source: string, destination: string, user: User, names: NameLookup): Promise<EntryInfo> {
  try {
    await ensureDirs(dirname(destination), user.uid, user.gid);
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.ResourceExhausted) throw err;
    throw internal("error creating destination directory", err);
  }
  try {
    await rename(source, destination);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") {
      throw new ConnectError(`source file not found: ${goError(err)}`, Code.NotFound, undefined, undefined, err);
    }
    throw internal("error renaming", err);
  }
  return entryInfo(destination, names);
}

/**
 * Remove (§6.5): rm -rf, a missing path is success. An empty request path is refused rather
 * than resolved to the home directory and deleted (reference quirk §12.4, deliberately not kept).
 */
export async function remove(requested: string, resolved: string): Promise<void> {
  if (requested === "") throw new ConnectError("path is required: refusing to remove the home directory", Code.InvalidArgument);
  try {
    await rm(resolved, { recursive: true, force: true });
  } catch (err) {
    throw internal("error removing file or directory", err);
  }
}

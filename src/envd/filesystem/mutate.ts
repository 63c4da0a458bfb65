import { close as closeFd } from "node:fs";
import { lstat, rename, rmdir, stat, unlink } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import type { EntryInfo } from "../gen/filesystem/filesystem_pb.js";
import type { User } from "../auth/users.js";
import { ensureDirs, ensureDirsOpen } from "../auth/paths.js";
import { addonExtra } from "../platform/addon.js";
import { entryInfo, type NameLookup } from "./entry-info.js";
import { fsError, goError } from "./go-error.js";

function internal(message: string, err: unknown): ConnectError {
  if (err instanceof ConnectError) return new ConnectError(`${message}: ${err.rawMessage}`, Code.Internal, undefined, undefined, err);
  return fsError(message, err);
}

/** A full disk, no addon to create directories safely with, or a link leading where the user may not write: said as such, not as internal. */
function passesThrough(err: unknown): boolean {
  const passing = [Code.ResourceExhausted, Code.FailedPrecondition, Code.PermissionDenied];
  return err instanceof ConnectError && passing.includes(err.code);
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
    await ensureDirs(path, user.uid, user.gid, user.groups);
  } catch (err) {
    if (passesThrough(err)) throw err;
    throw internal("error creating directory", err);
  }
  return entryInfo(path, names);
}

/** The directory part and the entry name of a path, trailing slashes ignored; name "" for "/". */
function splitEntry(path: string): { dir: string; name: string } {
  const trimmed = path.replace(/\/+$/, "");
  if (trimmed === "") return { dir: "/", name: "" };
  return { dir: dirname(trimmed), name: basename(trimmed) };
}

function isEntryName(name: string): boolean {
  return name !== "" && name !== "." && name !== "..";
}

/**
 * Move (§6.3): one rename(2) after creating the destination's parents; missing source → not_found.
 * The rename names the destination inside the parent directory's handle that the creation
 * walk opened, so a directory it just made cannot be swapped for a link before the rename; past
 * another user's link, source and destination directories must be ones the user may write.
 */
export async function move(source: string, destination: string, user: User, names: NameLookup): Promise<EntryInfo> {
  const target = splitEntry(destination);
  if (!isEntryName(target.name)) {
    throw new ConnectError(`invalid destination: ${destination} does not name a file or directory`, Code.InvalidArgument);
  }
  let dirFd: number;
  try {
    dirFd = await ensureDirsOpen(dirname(destination), user.uid, user.gid, user.groups);
  } catch (err) {
    if (passesThrough(err)) throw err;
    throw internal("error creating destination directory", err);
  }
  const renameAt = addonExtra("renameAt");
  try {
    const from = splitEntry(source);
    if (dirFd >= 0 && renameAt && isEntryName(from.name)) {
      await renameAt(from.dir, from.name, dirFd, target.name, user.uid, user.gid, user.groups).catch((err: unknown) => {
        if ((err as NodeJS.ErrnoException).syscall === "walk") throw err;
        throw Object.assign(err as object, { syscall: "rename", path: source, dest: destination });
      });
    }
    else await rename(source, destination);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") {
      throw new ConnectError(`source file not found: ${goError(err)}`, Code.NotFound, undefined, undefined, err);
    }
    if (code === "EACCES" && (err as NodeJS.ErrnoException).syscall === "walk") {
      throw new ConnectError(`error renaming: a link on the way to ${(err as NodeJS.ErrnoException).path} leads where the user may not write`, Code.PermissionDenied, undefined, undefined, err);
    }
    throw internal("error renaming", err);
  } finally {
    if (dirFd >= 0) closeFd(dirFd, () => undefined);
  }
  return entryInfo(destination, names);
}

/**
 * Without the addon only what needs no walk is removed: a file, a link (never its target) or an
 * empty directory. A tree is refused: removing it by path could be redirected through a link.
 */
async function removeWithoutAddon(path: string): Promise<void> {
  let st;
  try {
    st = await lstat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  if (!st.isDirectory()) return unlink(path).catch((err: NodeJS.ErrnoException) => (err.code === "ENOENT" ? undefined : Promise.reject(err)));
  try {
    await rmdir(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return;
    if (code !== "ENOTEMPTY" && code !== "EEXIST") throw err;
    throw new ConnectError(
      `${path} is a directory that is not empty, and removing a tree needs envd's native addon (native/inotify), which is not loaded`,
      Code.FailedPrecondition,
    );
  }
}

/**
 * Remove (§6.5): rm -rf, a missing path is success. An empty request path is refused rather
 * than resolved to the home directory and deleted (reference quirk §12.4, deliberately not kept).
 * The last component is never followed (a link is removed, not its target) and a tree is
 * removed relative to open directory handles, so a user swapping a directory in it for a link
 * cannot make envd delete what the link points at; a link another user made on the way to it
 * leads only where the request's user may write.
 */
export async function remove(requested: string, resolved: string, user: User): Promise<void> {
  if (requested === "") throw new ConnectError("path is required: refusing to remove the home directory", Code.InvalidArgument);
  const { dir, name } = splitEntry(resolved);
  if (!isEntryName(name)) {
    throw new ConnectError(`invalid path: ${requested} does not name a file or directory to remove`, Code.InvalidArgument);
  }
  const removeTree = addonExtra("removeTree");
  try {
    if (removeTree) await removeTree(dir, name, user.uid, user.gid, user.groups);
    else await removeWithoutAddon(`${dir === "/" ? "" : dir}/${name}`);
  } catch (err) {
    if (err instanceof ConnectError) throw err;
    const e = err as NodeJS.ErrnoException;
    if (e.code === "EACCES" && e.syscall === "walk") {
      throw new ConnectError(`error removing file or directory: a link on the way to ${dir} leads where the user may not write`, Code.PermissionDenied, undefined, undefined, err);
    }
    throw internal("error removing file or directory", err);
  }
}

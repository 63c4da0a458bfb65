import { constants, fstat, close, type Stats } from "node:fs";
import { lstat, open, readlink, realpath, rename, stat, unlink, type FileHandle } from "node:fs/promises";
import { constants as osConstants } from "node:os";
import { normalize } from "node:path";
import { getSystemErrorMap } from "node:util";
import type { User } from "../auth/users.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { ensureDirs } from "../auth/paths.js";
import { HttpError } from "../http/errors.js";
import { addonExtra } from "../platform/addon.js";

/** open(2)'s O_PATH (x86-64, arm64, riscv): a handle that names a file without opening it for I/O. */
const O_PATH = 0o10000000;
/** The access and status flags a reopened descriptor keeps. */
const REOPEN_MASK = constants.O_RDONLY | constants.O_WRONLY | constants.O_RDWR | constants.O_NONBLOCK | constants.O_APPEND;

const OP_OPEN = 0;
const OP_MKDIRS = 1;
const OP_RENAME = 2;
const OP_UNLINK = 3;

/** Whether a request's file operations are the daemon's own (root), made as they always were. */
export function isRoot(user: User): boolean {
  return user.uid === 0;
}

/** Whether an error says the kernel refused the user (so the answer is 403, not 500). */
export function isDenied(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException)?.code;
  return code === "EACCES" || code === "EPERM";
}

/**
 * The 403 for an operation the kernel refused the (non-root) user, or undefined for any other
 * failure. `context` names the stage as the other errors of the route do.
 */
export function refusal(err: unknown, user: User, context: string): HttpError | undefined {
  if (isRoot(user) || !isDenied(err)) return undefined;
  return new HttpError(403, `${context}: permission denied for user '${user.name}': ${(err as Error).message}`, { cause: err });
}

/**
 * Makes the missing parent directories `dir` of an upload or compose target, belonging to the
 * request's user (envd-behaviour §2.3). For a user other than root they are first made as the
 * user, the kernel checking every step. Where the user may look into a directory but not create
 * in it (`/` for E2B's own `/0/multi_test_file0.txt`), envd makes them for the user, as the
 * reference does: ensureDirs, relative to open directory handles, each directory born the
 * user's, never past a link the user planted unless the user could write where it leads. A
 * directory the user cannot even look into (root's 0700 home) is a 403 with nothing made: the
 * file itself is written as the user, who could not reach it. Refusals are 403 HttpErrors; other
 * failures are thrown as ensureDirs reports them, for the caller to answer.
 */
export async function ensureParents(user: User, dir: string): Promise<void> {
  if (await userParents(user, dir)) return;
  await ensureDirs(dir, user.uid, user.gid, user.groups).catch((err: unknown) => {
    if (err instanceof ConnectError && err.code === Code.PermissionDenied) {
      throw new HttpError(403, `error ensuring directories: permission denied for user '${user.name}': ${err.rawMessage}`, { cause: err });
    }
    throw err;
  });
}

/**
 * Creates the missing parents of a target as the user; true when they all exist now, false when
 * envd is to make them (root's requests, a directory the user reached but may not create in,
 * or a failure that ensureDirs reports as it always has: a file in the way, no space). A
 * directory the user cannot look into is a 403. A user's parents that all exist need no
 * ensureDirs (it never touches existing directories), which keeps root from walking a path the
 * user may be swapping links into meanwhile.
 */
async function userParents(user: User, dir: string): Promise<boolean> {
  if (isRoot(user)) return false;
  try {
    await mkdirsAs(user, dir);
    return true;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    // Without the addon nothing can be done as the user: fail before root creates anything.
    if (e.code === "ENOSYS") throw new HttpError(500, `error ensuring directories: ${e.message}`, { cause: err });
    if (e.code === "EACCES" && e.syscall === "mkdir") return false;
    const denied = refusal(err, user, "error ensuring directories");
    if (denied) throw denied;
    return false;
  }
}

/** A Node-style errno error (`EACCES: permission denied, open '/x'`) for a native -errno result. */
function errnoError(negErrno: number, syscall: string, path: string, dest?: string): NodeJS.ErrnoException {
  const [code, desc] = getSystemErrorMap().get(negErrno) ?? [`E${-negErrno}`, "unknown error"];
  const err: NodeJS.ErrnoException = new Error(`${code}: ${desc}, ${syscall} '${path}'${dest === undefined ? "" : ` -> '${dest}'`}`);
  Object.assign(err, { errno: negErrno, code, syscall, path, ...(dest === undefined ? {} : { dest }) });
  return err;
}

/** One call as the user; throws what Node's own fs call would for the same errno. */
async function call(user: User, op: number, syscall: string, path: string, path2 = "", flags = 0, mode = 0): Promise<number> {
  const asUser = addonExtra("asUser");
  if (!asUser) {
    const err: NodeJS.ErrnoException = new Error(`acting as user '${user.name}' needs envd's native addon, which is not loaded`);
    err.code = "ENOSYS";
    throw err;
  }
  const [result, at, inMkdir] = await asUser(op, user.uid, user.gid, user.groups, path, path2, flags, mode);
  if (result >= 0) return result;
  // mkdir -p names the call that failed: the mkdir itself, or the lookup of a directory on the way.
  const failed = op === OP_MKDIRS && !inMkdir ? "open" : syscall;
  throw errnoError(result, failed, op === OP_MKDIRS ? path.slice(0, at) || "/" : path, op === OP_RENAME ? path2 : undefined);
}

/** fstat of a raw descriptor, closing it afterwards. */
async function statAndClose(fd: number): Promise<Stats> {
  try {
    return await fstatP(fd);
  } finally {
    close(fd, () => undefined);
  }
}

/**
 * Opens a file as the user: the kernel checks the user's permissions on every component and
 * follows links as for that user (O_NOFOLLOW in `flags` refuses a link in the last one). Root
 * opens as the daemon always did.
 */
export async function openAs(user: User, path: string, flags: number, mode = 0o666): Promise<FileHandle> {
  if (isRoot(user)) return open(path, flags, mode);
  const fd = await call(user, OP_OPEN, "open", path, "", flags, mode);
  try {
    // The very inode the user opened, now as a FileHandle (Node makes none from a raw descriptor).
    return await open(`/proc/self/fd/${fd}`, flags & REOPEN_MASK);
  } finally {
    close(fd, () => undefined);
  }
}

/** stat (or lstat with `follow` false) as the user; undefined when nothing is there. */
export async function statAs(user: User, path: string, follow = true): Promise<Stats | undefined> {
  try {
    if (isRoot(user)) return await (follow ? stat(path) : lstat(path));
    return await statAndClose(await call(user, OP_OPEN, follow ? "stat" : "lstat", path, "", O_PATH | (follow ? 0 : constants.O_NOFOLLOW)));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/**
 * The canonical path of a file, every link resolved as the user would resolve it. A file unlinked
 * while this runs is ENOENT: the kernel then names the handle "<path> (deleted)", which must
 * never be taken for a path.
 */
export async function realpathAs(user: User, path: string): Promise<string> {
  if (isRoot(user)) return realpath(path);
  const fd = await call(user, OP_OPEN, "realpath", path, "", O_PATH);
  let real: string;
  let held: Stats;
  try {
    real = await readlink(`/proc/self/fd/${fd}`);
    held = await fstatP(fd);
  } finally {
    close(fd, () => undefined);
  }
  const named = await statAs(user, real, false);
  if (!named || named.ino !== held.ino || named.dev !== held.dev) throw errnoError(-osConstants.errno.ENOENT, "realpath", path);
  return real;
}

function fstatP(fd: number): Promise<Stats> {
  return new Promise((resolve, reject) => fstat(fd, (err, st) => (err ? reject(err) : resolve(st))));
}

/**
 * Creates the missing directories of `dir` (mode 0755) as the user, so they are the user's own. Root
 * creates none here (ensureDirs does, as always); a failure names the directory it stopped at,
 * with syscall "mkdir" when the user reached that directory but could not create in it, "open"
 * when a directory on the way could not be looked into.
 */
export async function mkdirsAs(user: User, dir: string): Promise<void> {
  if (isRoot(user)) return;
  await call(user, OP_MKDIRS, "mkdir", normalize(dir));
}

/** rename(2) as the user (sticky directories and write permission apply). */
export async function renameAs(user: User, from: string, to: string): Promise<void> {
  if (isRoot(user)) return rename(from, to);
  await call(user, OP_RENAME, "rename", from, to);
}

/** unlink(2) as the user. */
export async function unlinkAs(user: User, path: string): Promise<void> {
  if (isRoot(user)) return unlink(path);
  await call(user, OP_UNLINK, "unlink", path);
}

import { chown, copyFile, lstat, open, realpath, rename, stat, unlink, type FileHandle } from "node:fs/promises";
import type { Stats } from "node:fs";
import { randomBytes } from "node:crypto";
import { basename, dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { ConnectError, Code } from "@connectrpc/connect";
import { ensureDirs } from "../auth/paths.js";
import type { User } from "../auth/users.js";
import { HttpError } from "../http/errors.js";
import type { Logger } from "../http/log.js";
import { writeMetadata } from "./xattr-errors.js";
import { bodyError } from "./body.js";
import { writeAll } from "./io.js";
import type { UploadJournal } from "./journal.js";

/** One file an upload writes. */
export interface UploadTarget {
  /** Resolved absolute target path. */
  path: string;
  user: User;
  metadata: Record<string, string>;
  /** The request's Content-Length when positive (named in the out-of-space message). */
  contentLength: number | undefined;
  log: Logger;
  /** Maps an error of the body stream (not of the file) to the answer; defaults to bodyError. */
  sourceError?: (err: unknown) => Error;
  /** Where in-flight uploads are recorded for cleanup after a crash. */
  journal?: UploadJournal;
}

/** errnos meaning "no temp file or rename here": fall back to writing the target in place. */
const IN_PLACE_ERRNOS = new Set(["EXDEV", "EPERM", "EINVAL", "EACCES", "EROFS", "EOPNOTSUPP", "ENOTSUP", "EBUSY"]);

/**
 * Writes an upload body to its target so that a failed or cut-off upload leaves the old content
 * or nothing, never a torn file. A new file is created exclusively and removed again on failure
 * (watchers see CREATE, CHMOD, WRITE on its name, as with the reference). An existing file is
 * replaced through a temp file beside it, renamed over it once complete. Virtual filesystems,
 * devices and directories refusing temp files are written in place with truncate.
 */
export async function storeUpload(t: UploadTarget, body: Readable): Promise<void> {
  try {
    await ensureDirs(dirname(t.path), t.user.uid, t.user.gid);
  } catch (err) {
    // A parent that is a file is the client's mistake (400); a full disk 507; the rest 500.
    const code = err instanceof ConnectError ? err.code : undefined;
    const status = code === Code.ResourceExhausted ? 507 : code === Code.InvalidArgument ? 400 : 500;
    const message = err instanceof ConnectError ? err.rawMessage : (err as Error).message;
    throw new HttpError(status, `error ensuring directories: ${message}`, { cause: err });
  }
  for (let attempt = 0; ; attempt++) {
    const existing = await statTarget(t.path);
    if (!existing && !(await isSymlink(t.path))) {
      // Journaled before the file exists: a crash at any later point leaves nothing the next start misses.
      const entry = await t.journal?.begin({ created: { path: t.path } });
      const fh = await open(t.path, "wx", 0o666).catch(async (err: NodeJS.ErrnoException) => {
        await t.journal?.end(entry);
        // Created by someone else meanwhile: replace it like any existing file.
        if (err.code === "EEXIST" && attempt === 0) return undefined;
        throw openError(err);
      });
      if (fh) return writeDirect(t, body, fh, true, false, entry);
      continue;
    }
    return replaceExisting(t, body, existing);
  }
}

async function statTarget(path: string): Promise<Stats | undefined> {
  const st = await stat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw new HttpError(500, `error getting file info: ${err.message}`, { cause: err });
  });
  if (st?.isDirectory()) throw new HttpError(400, `path is a directory: ${path}`);
  return st;
}

async function isSymlink(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined))?.isSymbolicLink() ?? false;
}

async function replaceExisting(t: UploadTarget, body: Readable, existing: Stats | undefined): Promise<void> {
  const real = await atomicTarget(t.path, existing);
  if (real && existing) {
    const temp = join(dirname(real), `.${basename(real).slice(0, 64)}.envd-upload.${randomBytes(6).toString("hex")}.tmp`);
    // Journaled before it exists: a crash at any later point leaves nothing the next start misses.
    const entry = await t.journal?.begin({ temp });
    let fh: FileHandle | undefined;
    try {
      fh = await open(temp, "wx", 0o666);
    } catch (err) {
      await t.journal?.end(entry);
      const code = (err as NodeJS.ErrnoException).code ?? "";
      // No inode left for a temp file: the existing file is rewritten in place, as the reference does.
      if (!IN_PLACE_ERRNOS.has(code) && code !== "ENOSPC") throw openError(err);
    }
    if (fh) return writeViaTemp(t, body, fh, temp, real, existing, entry);
  }
  // Devices, procfs/sysfs, dangling links and directories refusing temp files: truncate in place.
  if (existing) await chown(t.path, t.user.uid, t.user.gid).catch(() => undefined);
  const fh = await open(t.path, "w", 0o666).catch((err) => {
    throw openError(err);
  });
  await writeDirect(t, body, fh, false, existing !== undefined);
}

/** The real path of a regular file to replace atomically, or undefined to write in place. */
async function atomicTarget(path: string, existing: Stats | undefined): Promise<string | undefined> {
  if (!existing?.isFile()) return undefined;
  const real = await realpath(path);
  const dir = await realpath(dirname(real)).catch(() => dirname(real));
  if (/^\/(proc|sys)(\/|$)/.test(dir)) return undefined;
  return real;
}

/**
 * Writes the body straight into an open target. A file this upload `created` is removed again
 * on failure; a file that was there stays as far as it got. New files are handed to the user.
 */
async function writeDirect(t: UploadTarget, body: Readable, fh: FileHandle, created: boolean, existed = false, entry?: string): Promise<void> {
  let done = false;
  const ino = created ? (await fh.stat()).ino : 0;
  // The inode is journaled before the first byte, so the next start can tell this very file.
  if (created) await t.journal?.update(entry, { created: { path: t.path, ino } });
  try {
    if (!existed) await fh.chown(t.user.uid, t.user.gid).catch((err) => Promise.reject(chownError(err)));
    await copyBody(t, body, fh);
    await writeMetadata(t.path, t.metadata, t.log);
    done = true;
  } finally {
    // Only the very file this upload created: a concurrent upload may have replaced it meanwhile.
    // Checked while our handle is still open, so its inode number cannot have been reused yet,
    // and under the path's lock, so no replacement can land between the check and the unlink.
    if (!done && created) {
      await underPathLock(t.path, async () => {
        if ((await lstat(t.path).catch(() => undefined))?.ino === ino) await unlink(t.path).catch(() => undefined);
      });
    }
    await fh.close().catch(() => undefined);
    await t.journal?.end(entry);
  }
}

async function writeViaTemp(t: UploadTarget, body: Readable, fh: FileHandle, temp: string, real: string, existing: Stats, entry: string | undefined): Promise<void> {
  let done = false;
  try {
    await fh.chown(t.user.uid, t.user.gid).catch((err) => Promise.reject(chownError(err)));
    // An overwritten file keeps its permission bits, as it would when truncated in place.
    await fh.chmod(existing.mode & 0o777);
    const size = await copyBody(t, body, fh);
    await writeMetadata(temp, t.metadata, t.log);
    try {
      await underPathLock(t.path, () => rename(temp, real));
    } catch (err) {
      if (!IN_PLACE_ERRNOS.has((err as NodeJS.ErrnoException).code ?? "")) throw writeError(err, t);
      // e.g. a bind-mounted single file: copy the finished content over it instead.
      await copyFile(temp, real).catch((e) => Promise.reject(writeError(e, t)));
      await chown(real, t.user.uid, t.user.gid).catch(() => undefined);
      await writeMetadata(real, t.metadata, t.log);
    }
    done = true;
    // Watchers of the directory saw the rename; this tells them the named file's content changed
    // (a WRITE event, as truncating in place would give). The handle is still our new inode.
    await fh.truncate(size).catch(() => undefined);
  } finally {
    await fh.close().catch(() => undefined);
    if (!done || (await isPresent(temp))) await unlink(temp).catch(() => undefined);
    await t.journal?.end(entry);
  }
}

const pathLocks = new Map<string, Promise<void>>();

/** Runs `fn` alone among this daemon's uploads to `path` (short commit and cleanup steps only). */
async function underPathLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const prev = pathLocks.get(path) ?? Promise.resolve();
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const mine = prev.then(() => held);
  pathLocks.set(path, mine);
  await prev;
  try {
    return await fn();
  } finally {
    release();
    if (pathLocks.get(path) === mine) pathLocks.delete(path);
  }
}

/** Copies the body into the file chunk by chunk (backpressure for free); file and body errors are told apart. */
async function copyBody(t: UploadTarget, body: Readable, fh: FileHandle): Promise<number> {
  const chunks = body[Symbol.asyncIterator]();
  let size = 0;
  for (;;) {
    let next: IteratorResult<Buffer>;
    try {
      next = await chunks.next();
    } catch (err) {
      throw (t.sourceError ?? bodyError)(err);
    }
    if (next.done) return size;
    try {
      await writeAll(fh, next.value);
      size += next.value.length;
    } catch (err) {
      await chunks.return?.();
      throw writeError(err, t);
    }
  }
}

function openError(err: unknown): HttpError {
  const message = (err as Error).message;
  if ((err as NodeJS.ErrnoException).code === "ENOSPC") return new HttpError(507, `not enough inodes available: ${message}`, { cause: err });
  return new HttpError(500, `error opening file: ${message}`, { cause: err });
}

function chownError(err: unknown): HttpError {
  return new HttpError(500, `error changing file ownership: ${(err as Error).message}`, { cause: err });
}

function writeError(err: unknown, t: UploadTarget): HttpError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOSPC" || code === "EDQUOT") {
    const prefix = t.contentLength ? `attempted to write ${t.contentLength} bytes: ` : "";
    return new HttpError(507, `${prefix}not enough disk space available`, { cause: err });
  }
  return new HttpError(500, `error writing file: ${(err as Error).message}`, { cause: err });
}

async function isPresent(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

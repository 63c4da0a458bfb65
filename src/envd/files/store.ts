import { chown, type FileHandle } from "node:fs/promises";
import { constants, type Stats } from "node:fs";
import { crypto } from "../platform/crypto.js";
import { basename, dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { ConnectError, Code } from "@connectrpc/connect";
import type { User } from "../auth/users.js";
import { HttpError } from "../http/errors.js";
import type { Logger } from "../http/log.js";
import { writeMetadata } from "./xattr-errors.js";
import { bodyError } from "./body.js";
import { readChunks, writeAll } from "./io.js";
import { ensureParents, isRoot, openAs, realpathAs, refusal, renameAs, statAs, unlinkAs } from "./user-fs.js";
import type { UploadJournal } from "./journal.js";
import { commitCount, committed, tracked, underPathLock } from "./path-commits.js";

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

const { O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_TRUNC, O_NONBLOCK } = constants;

/** errnos meaning "no temp file or rename here": fall back to writing the target in place. */
const IN_PLACE_ERRNOS = new Set(["EXDEV", "EPERM", "EINVAL", "EACCES", "EROFS", "EOPNOTSUPP", "ENOTSUP", "EBUSY"]);

/**
 * Writes an upload body to its target so that a failed or cut-off upload leaves the old content
 * or nothing, never a torn file. A new file is created exclusively and removed again on failure
 * (watchers see CREATE, CHMOD, WRITE on its name, as with the reference). An existing file is
 * replaced through a temp file beside it, renamed over it once complete. Virtual filesystems and
 * directories refusing temp files are written in place with truncate. For a user other than root
 * every lookup, create, rename and unlink is made as that user (user-fs.ts): the kernel decides
 * what the user may reach, links included. FIFOs, sockets and devices are refused.
 */
export function storeUpload(t: UploadTarget, body: Readable): Promise<void> {
  return tracked(t.path, () => storeTracked(t, body));
}

async function storeTracked(t: UploadTarget, body: Readable): Promise<void> {
  await parents(t);
  for (let attempt = 0; ; attempt++) {
    const existing = await statTarget(t);
    if (!existing && !(await isSymlink(t))) {
      // Journaled before the file exists: a crash at any later point leaves nothing the next start misses.
      const entry = await t.journal?.begin({ created: { path: t.path } });
      const fh = await openAs(t.user, t.path, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC).catch(async (err: NodeJS.ErrnoException) => {
        await t.journal?.end(entry);
        // Created by someone else meanwhile: replace it like any existing file.
        if (err.code === "EEXIST" && attempt < 3) return undefined;
        throw openError(err, t.user);
      });
      if (fh) return writeDirect(t, body, fh, true, false, entry);
      continue;
    }
    const real = await atomicTarget(t, existing, attempt < 3);
    // Removed between the stat and the path lookup (a failed upload that created it): start over.
    if (real === VANISHED) continue;
    return replaceExisting(t, body, existing, real);
  }
}

/** atomicTarget's answer for a target that disappeared while it was looked up. */
const VANISHED = Symbol("vanished");

/** The target's missing parents, the user's (ensureParents); its failures answered as the reference's ensureDirs ones. */
async function parents(t: UploadTarget): Promise<void> {
  try {
    await ensureParents(t.user, dirname(t.path));
  } catch (err) {
    if (err instanceof HttpError) throw err;
    // A parent that is a file is the client's mistake (400); a full disk 507; the rest 500.
    const code = err instanceof ConnectError ? err.code : undefined;
    const status = code === Code.ResourceExhausted ? 507 : code === Code.InvalidArgument ? 400 : 500;
    const message = err instanceof ConnectError ? err.rawMessage : (err as Error).message;
    throw new HttpError(status, `error ensuring directories: ${message}`, { cause: err });
  }
}

async function statTarget(t: UploadTarget): Promise<Stats | undefined> {
  const st = await statAs(t.user, t.path).catch((err: NodeJS.ErrnoException) => {
    throw refusal(err, t.user, "error getting file info") ?? new HttpError(500, `error getting file info: ${err.message}`, { cause: err });
  });
  if (st?.isDirectory()) throw new HttpError(400, `path is a directory: ${t.path}`);
  if (st && !st.isFile()) throw notRegular(t.path);
  return st;
}

async function isSymlink(t: UploadTarget): Promise<boolean> {
  return (await statAs(t.user, t.path, false).catch(() => undefined))?.isSymbolicLink() ?? false;
}

/** A FIFO, socket or device: opening one can block a thread for good or act on hardware. */
function notRegular(path: string): HttpError {
  return new HttpError(400, `path '${path}' is not a regular file: uploads write regular files only (not FIFOs, sockets or devices)`);
}

async function replaceExisting(t: UploadTarget, body: Readable, existing: Stats | undefined, real: string | undefined): Promise<void> {
  if (real && existing) {
    const temp = join(dirname(real), `.${basename(real).slice(0, 64)}.envd-upload.${crypto().randomBytes(6).toString("hex")}.tmp`);
    // Journaled before it exists: a crash at any later point leaves nothing the next start misses.
    const entry = await t.journal?.begin({ temp });
    let fh: FileHandle | undefined;
    try {
      // Readable too: a target that cannot be renamed over gets the finished content copied from it.
      fh = await openAs(t.user, temp, O_RDWR | O_CREAT | O_EXCL);
    } catch (err) {
      await t.journal?.end(entry);
      const code = (err as NodeJS.ErrnoException).code ?? "";
      // No inode left for a temp file: the existing file is rewritten in place, as the reference does.
      if (!IN_PLACE_ERRNOS.has(code) && code !== "ENOSPC") throw openError(err, t.user);
    }
    if (fh) return writeViaTemp(t, body, fh, temp, real, existing, entry);
  }
  // procfs/sysfs, dangling links and directories refusing temp files: truncate in place.
  // Only root's uploads hand an existing file to the request user, as the reference does.
  if (existing && isRoot(t.user)) await chown(t.path, t.user.uid, t.user.gid).catch(() => undefined);
  const fh = await openInPlace(t, t.path);
  return writeDirect(t, body, fh, false, existing !== undefined);
}

/** Opens an existing target for writing in place, refusing what turned into a special file meanwhile. */
async function openInPlace(t: UploadTarget, path: string): Promise<FileHandle> {
  const fh = await openAs(t.user, path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK).catch((err) => {
    throw openError(err, t.user);
  });
  if (!(await fh.stat()).isFile()) {
    await fh.close().catch(() => undefined);
    throw notRegular(path);
  }
  return fh;
}

/**
 * The real path of a regular file to replace atomically, undefined to write in place, or
 * VANISHED when the file is gone by now and `retry` allows starting over.
 */
async function atomicTarget(t: UploadTarget, existing: Stats | undefined, retry: boolean): Promise<string | undefined | typeof VANISHED> {
  if (!existing?.isFile()) return undefined;
  let real: string;
  try {
    real = await realpathAs(t.user, t.path);
  } catch (err) {
    if (retry && (err as NodeJS.ErrnoException).code === "ENOENT") return VANISHED;
    throw refusal(err, t.user, "error getting file info") ?? new HttpError(500, `error getting file info: ${(err as Error).message}`, { cause: err });
  }
  if (/^\/(proc|sys)(\/|$)/.test(dirname(real))) return undefined;
  return real;
}

/**
 * Writes the body straight into an open target. A file this upload `created` is removed again
 * on failure; a file that was there stays as far as it got. New files are handed to the user.
 */
async function writeDirect(t: UploadTarget, body: Readable, fh: FileHandle, created: boolean, existed = false, entry?: string): Promise<void> {
  let done = false;
  const mine = created ? await fh.stat() : undefined;
  const since = commitCount(t.path);
  // The inode is journaled before the first byte, so the next start can tell this very file.
  if (mine) await t.journal?.update(entry, { created: { path: t.path, ino: mine.ino } });
  try {
    if (!existed) await fh.chown(t.user.uid, t.user.gid).catch((err) => Promise.reject(chownError(err)));
    await copyBody(t, body, fh);
    await writeMetadata(t.path, t.metadata, t.log);
    done = true;
    committed(t.path);
  } finally {
    // Only the very file this upload created: a concurrent upload may have replaced it meanwhile.
    // Checked while our handle is still open, so its inode number cannot have been reused yet,
    // and under the path's lock, so no replacement can land between the check and the unlink.
    if (!done && mine) {
      await underPathLock(t.path, async () => {
        const now = await statAs(t.user, t.path, false).catch(() => undefined);
        const ours = now?.ino === mine.ino && now.dev === mine.dev && (commitCount(t.path)) === since;
        if (ours) await unlinkAs(t.user, t.path).catch(() => undefined);
      });
    }
    await fh.close().catch(() => undefined);
    await t.journal?.end(entry);
  }
}

async function writeViaTemp(t: UploadTarget, body: Readable, fh: FileHandle, temp: string, real: string, existing: Stats, entry: string | undefined): Promise<void> {
  let renamed = false;
  try {
    await fh.chown(t.user.uid, t.user.gid).catch((err) => Promise.reject(chownError(err)));
    // An overwritten file keeps its permission bits, as it would when truncated in place.
    await fh.chmod(existing.mode & 0o777);
    const size = await copyBody(t, body, fh);
    await writeMetadata(temp, t.metadata, t.log);
    try {
      await underPathLock(t.path, () => renameAs(t.user, temp, real));
      renamed = true;
      committed(t.path);
    } catch (err) {
      if (!IN_PLACE_ERRNOS.has((err as NodeJS.ErrnoException).code ?? "")) throw writeError(err, t);
      // e.g. a bind-mounted single file: copy the finished content over it instead.
      await copyOver(t, fh, size, real);
      committed(t.path);
    }
    // Watchers of the directory saw the rename; this tells them the named file's content changed
    // (a WRITE event, as truncating in place would give). The handle is still our new inode.
    if (renamed) await fh.truncate(size).catch(() => undefined);
  } finally {
    await fh.close().catch(() => undefined);
    if (!renamed) await unlinkAs(t.user, temp).catch(() => undefined);
    await t.journal?.end(entry);
  }
}

/** Copies a finished temp file over a target that cannot be renamed over; the target's metadata. */
async function copyOver(t: UploadTarget, from: FileHandle, size: number, real: string): Promise<void> {
  const out = await openInPlace(t, real);
  try {
    for await (const chunk of readChunks(from, 0, size - 1)) await writeAll(out, chunk).catch((e) => Promise.reject(writeError(e, t)));
    if (isRoot(t.user)) await out.chown(t.user.uid, t.user.gid).catch(() => undefined);
    await writeMetadata(real, t.metadata, t.log);
  } finally {
    await out.close().catch(() => undefined);
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

function openError(err: unknown, user: User): HttpError {
  if (err instanceof HttpError) return err;
  const message = (err as Error).message;
  if ((err as NodeJS.ErrnoException).code === "ENOSPC") return new HttpError(507, `not enough inodes available: ${message}`, { cause: err });
  return refusal(err, user, "error opening file") ?? new HttpError(500, `error opening file: ${message}`, { cause: err });
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

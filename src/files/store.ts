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
}

/** errnos meaning "no temp file or rename here": fall back to writing the target in place. */
const IN_PLACE_ERRNOS = new Set(["EXDEV", "EPERM", "EINVAL", "EACCES", "EROFS", "EOPNOTSUPP", "ENOTSUP", "EBUSY"]);

/**
 * Writes an upload body to its target. Normally the body goes to a temp file beside the target,
 * which gets ownership and metadata and is renamed over it: a failed or cut-off upload leaves the
 * old content (or nothing). Virtual filesystems, devices and directories refusing temp files
 * are written in place with truncate, as the reference always does.
 */
export async function storeUpload(t: UploadTarget, body: Readable): Promise<void> {
  try {
    await ensureDirs(dirname(t.path), t.user.uid, t.user.gid);
  } catch (err) {
    const status = err instanceof ConnectError && err.code === Code.ResourceExhausted ? 507 : 500;
    throw new HttpError(status, `error ensuring directories: ${(err as Error).message}`, { cause: err });
  }
  const existing = await stat(t.path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw new HttpError(500, `error getting file info: ${err.message}`, { cause: err });
  });
  if (existing?.isDirectory()) throw new HttpError(400, `path is a directory: ${t.path}`);

  const real = await atomicTarget(t.path, existing);
  if (real) {
    const temp = join(dirname(real), `.${basename(real).slice(0, 64)}.envd-upload.${randomBytes(6).toString("hex")}.tmp`);
    let fh: FileHandle | undefined;
    try {
      fh = await open(temp, "wx", 0o666);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? "";
      // Out of inodes: an existing file can still be rewritten in place, as the reference does.
      const inPlace = IN_PLACE_ERRNOS.has(code) || (code === "ENOSPC" && existing !== undefined);
      if (!inPlace) throw openError(err);
    }
    if (fh) return writeViaTemp(t, body, fh, temp, real, existing);
  }
  await writeInPlace(t, body, existing);
}

/** The real path to replace atomically, or undefined when the target must be written in place. */
async function atomicTarget(path: string, existing: Stats | undefined): Promise<string | undefined> {
  if (existing && !existing.isFile()) return undefined;
  let real = path;
  if (existing) real = await realpath(path);
  else if ((await lstat(path).catch(() => undefined))?.isSymbolicLink()) return undefined; // dangling link: create its target
  const dir = await realpath(dirname(real)).catch(() => dirname(real));
  if (/^\/(proc|sys)(\/|$)/.test(dir)) return undefined;
  return real;
}

async function writeViaTemp(t: UploadTarget, body: Readable, fh: FileHandle, temp: string, real: string, existing: Stats | undefined): Promise<void> {
  let done = false;
  try {
    await fh.chown(t.user.uid, t.user.gid).catch((err) => {
      throw new HttpError(500, `error changing file ownership: ${(err as Error).message}`, { cause: err });
    });
    // An overwritten file keeps its permission bits, as it would when truncated in place.
    if (existing) await fh.chmod(existing.mode & 0o777);
    await copyBody(t, body, fh);
    await writeMetadata(temp, t.metadata, t.log);
    await fh.close();
    try {
      await rename(temp, real);
    } catch (err) {
      if (!IN_PLACE_ERRNOS.has((err as NodeJS.ErrnoException).code ?? "")) throw writeError(err, t);
      // e.g. a bind-mounted single file: copy the finished content over it instead.
      await copyFile(temp, real).catch((e) => {
        throw writeError(e, t);
      });
      await chown(real, t.user.uid, t.user.gid).catch(() => undefined);
      await writeMetadata(real, t.metadata, t.log);
    }
    done = true;
  } finally {
    await fh.close().catch(() => undefined);
    if (!done || (await exists(temp))) await unlink(temp).catch(() => undefined);
  }
}

async function writeInPlace(t: UploadTarget, body: Readable, existing: Stats | undefined): Promise<void> {
  if (existing) await chown(t.path, t.user.uid, t.user.gid).catch(() => undefined);
  let fh: FileHandle;
  try {
    fh = await open(t.path, "w", 0o666);
  } catch (err) {
    throw openError(err);
  }
  try {
    if (!existing) {
      await fh.chown(t.user.uid, t.user.gid).catch((err) => {
        throw new HttpError(500, `error changing file ownership: ${(err as Error).message}`, { cause: err });
      });
    }
    await copyBody(t, body, fh);
  } finally {
    await fh.close().catch(() => undefined);
  }
  await writeMetadata(t.path, t.metadata, t.log);
}

/** Copies the body into the file chunk by chunk (backpressure for free); file and body errors are told apart. */
async function copyBody(t: UploadTarget, body: Readable, fh: FileHandle): Promise<void> {
  const chunks = body[Symbol.asyncIterator]();
  for (;;) {
    let next: IteratorResult<Buffer>;
    try {
      next = await chunks.next();
    } catch (err) {
      throw (t.sourceError ?? bodyError)(err);
    }
    if (next.done) return;
    try {
      await writeAll(fh, next.value);
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

function writeError(err: unknown, t: UploadTarget): HttpError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOSPC" || code === "EDQUOT") {
    const prefix = t.contentLength ? `attempted to write ${t.contentLength} bytes: ` : "";
    return new HttpError(507, `${prefix}not enough disk space available`, { cause: err });
  }
  return new HttpError(500, `error writing file: ${(err as Error).message}`, { cause: err });
}

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

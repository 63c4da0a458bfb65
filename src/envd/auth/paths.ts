import { mkdir, stat } from "node:fs/promises";
import { isAbsolute, join, normalize, resolve, sep } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import type { User } from "./users.js";
import { addonExtra } from "../platform/addon.js";

/** Longest path we accept (Linux PATH_MAX). */
export const MAX_PATH_BYTES = 4096;

/**
 * Resolves a request path for a user exactly as the reference does (envd-behaviour §2.2):
 * empty → default workdir (or home), `~` / `~/x` → under home, absolute → as is (not
 * normalised), relative → joined to home and cleaned. Throws invalid_argument on bad input.
 */
export function expandAndResolve(path: string, user: User, defaultWorkdir?: string): string {
  validatePath(path);
  let p = path;
  if (p === "" && defaultWorkdir) p = defaultWorkdir;
  if (p.startsWith("~")) {
    if (p === "~") p = user.home;
    else if (p.startsWith("~/") || p.startsWith("~\\")) p = join(user.home, p.slice(2));
    else {
      throw new ConnectError(
        `failed to expand path '${path}' for user '${user.name}': cannot expand user-specific home dir`,
        Code.InvalidArgument,
      );
    }
  }
  if (isAbsolute(p)) return p;
  return resolve(user.home, p);
}

/** Rejects paths no filesystem call could take: NUL bytes, over-long paths. */
export function validatePath(path: string): void {
  if (path.includes("\0")) throw new ConnectError("invalid path: contains a NUL byte", Code.InvalidArgument);
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) {
    throw new ConnectError(`invalid path: longer than ${MAX_PATH_BYTES} bytes`, Code.InvalidArgument);
  }
}

/** The request failed because a directory could not be made: the error the RPCs and /files wrap. */
function dirsError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  const e = err as NodeJS.ErrnoException;
  const at = e.path ?? "";
  switch (e.code) {
    case "ENOTDIR":
      return new ConnectError(`path is a file: ${at}`, Code.InvalidArgument, undefined, undefined, err);
    case "ELOOP":
      return new ConnectError(`a symbolic link took the place of ${at} while it was being created`, Code.Internal, undefined, undefined, err);
    case "EACCES":
      if (e.syscall === "walk") {
        return new ConnectError(`a link on the way to ${at} leads where the user may not write`, Code.PermissionDenied, undefined, undefined, err);
      }
      break;
    case "ENOSPC":
      return new ConnectError(`failed to create directory ${at}: ${e.message}`, Code.ResourceExhausted, undefined, undefined, err);
  }
  if (e.syscall === "mkdirat") return new ConnectError(`failed to create directory ${at}: ${e.message}`, Code.Internal, undefined, undefined, err);
  return new ConnectError(`failed to stat directory: ${e.message}`, Code.Internal, undefined, undefined, err);
}

/**
 * Without the addon: nothing needs creating (every component is a directory already), or the
 * directories are root's own (nothing to chown, so no chown to redirect). Creating directories
 * for another user by path could be redirected through a link, so that is refused.
 */
async function ensureDirsWithoutAddon(dir: string, uid: number, gid: number): Promise<void> {
  try {
    const st = await stat(dir);
    if (st.isDirectory()) return;
    throw Object.assign(new Error("not a directory"), { code: "ENOTDIR", path: dir });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "ENOENT" && code !== "ENOTDIR") throw dirsError(err);
    if (code === "ENOTDIR") {
      // Which component is the file: the first one that is not a directory.
      let current = "";
      for (const part of dir.split(sep).filter(Boolean)) {
        current += sep + part;
        const st = await stat(current).catch(() => undefined);
        if (st && !st.isDirectory()) throw dirsError(Object.assign(new Error("not a directory"), { code: "ENOTDIR", path: current }));
      }
      throw dirsError(err);
    }
  }
  if (uid !== process.geteuid?.() || gid !== process.getegid?.()) {
    throw new ConnectError(
      "creating directories for a user needs envd's native addon (native/inotify), which is not loaded",
      Code.FailedPrecondition,
    );
  }
  await mkdir(dir, { recursive: true, mode: 0o755 }).catch((err: unknown) => {
    throw dirsError(Object.assign(err as object, { syscall: "mkdirat" }));
  });
}

/**
 * Creates every missing directory from the top down to `dir` (inclusive), mode 0755, owned by
 * uid:gid (envd-behaviour §2.3); existing directories are left as they are. Each new directory
 * is made in its parent's open handle, owned by uid:gid from its creation (never chowned, so a
 * user racing the walk has nothing to turn a chown onto) and opened without following a link.
 * Existing directories are walked as named, links included; past a link someone other than
 * root made, directories are made only where the user (`groups`: supplementary ids) may write.
 */
export async function ensureDirs(dir: string, uid: number, gid: number, groups: readonly number[] = [gid]): Promise<void> {
  const makeDirs = addonExtra("makeDirs");
  if (!makeDirs) return ensureDirsWithoutAddon(normalize(dir), uid, gid);
  try {
    await makeDirs(normalize(dir), uid, gid, groups, false);
  } catch (err) {
    throw dirsError(err);
  }
}

/**
 * ensureDirs, then an fd of `dir` (the caller closes it): what a later step names its entries
 * in, so that `dir` cannot be swapped for a link between the two. -1 without the addon.
 */
export async function ensureDirsOpen(dir: string, uid: number, gid: number, groups: readonly number[] = [gid]): Promise<number> {
  const makeDirs = addonExtra("makeDirs");
  if (!makeDirs) {
    await ensureDirsWithoutAddon(normalize(dir), uid, gid);
    return -1;
  }
  try {
    return await makeDirs(normalize(dir), uid, gid, groups, true);
  } catch (err) {
    throw dirsError(err);
  }
}

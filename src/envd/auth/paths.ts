import { mkdir, chown, stat } from "node:fs/promises";
import { isAbsolute, join, normalize, resolve, sep } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import type { User } from "./users.js";

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

/**
 * Creates every missing directory from the top down to `dir` (inclusive), mode 0755,
 * chowned to uid:gid (envd-behaviour §2.3). Existing directories are left as they are.
 */
export async function ensureDirs(dir: string, uid: number, gid: number): Promise<void> {
  const parts = normalize(dir).split(sep).filter(Boolean);
  let current = "";
  for (const part of parts) {
    current += sep + part;
    let st;
    try {
      st = await stat(current);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
        throw new ConnectError(`failed to stat directory: ${(err as Error).message}`, Code.Internal, undefined, undefined, err);
      }
    }
    if (st) {
      if (!st.isDirectory()) throw new ConnectError(`path is a file: ${current}`, Code.InvalidArgument);
      continue;
    }
    try {
      await mkdir(current, { mode: 0o755 });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "EEXIST") {
        throw new ConnectError(
          `failed to create directory ${current}: ${(err as Error).message}`,
          code === "ENOSPC" ? Code.ResourceExhausted : Code.Internal,
          undefined,
          undefined,
          err,
        );
      }
    }
    await chown(current, uid, gid).catch(() => undefined);
  }
}

import { replaceMetadata } from "../filesystem/xattr.js";
import { HttpError } from "../http/errors.js";
import type { Logger } from "../http/log.js";

/**
 * The errno behind an @napi-rs/xattr failure. Its errors carry no `code`, only a message such
 * as "No space left on device (os error 28)", so the number is read from the message.
 */
export function xattrErrno(err: unknown): number | undefined {
  const m = /\(os error (\d+)\)/.exec(String((err as Error)?.message ?? err));
  return m ? Number(m[1]) : undefined;
}

const ENOSPC = 28;
const EDQUOT = 122;

/**
 * Makes a file's `user.e2b.*` metadata exactly `meta` (always, so an upload without headers
 * clears stale keys). No xattr support → skipped and logged; out of space → 507; else 500.
 */
export async function writeMetadata(path: string, meta: Record<string, string>, log: Logger): Promise<void> {
  let supported: boolean;
  try {
    supported = await replaceMetadata(path, meta);
  } catch (err) {
    const errno = xattrErrno(err);
    const message = (err as Error)?.message ?? String(err);
    if (errno === ENOSPC || errno === EDQUOT) throw new HttpError(507, `not enough space for file metadata: ${message}`, { cause: err });
    throw new HttpError(500, `error writing file metadata: ${message}`, { cause: err });
  }
  if (!supported) log.debug({ path }, "filesystem has no xattr support; metadata skipped");
}

import { lazy } from "../platform/lazy.js";

// The native addon is opened by the first metadata read or write, not at start.
const napi = lazy<typeof import("@napi-rs/xattr")>("@napi-rs/xattr", () => require("@napi-rs/xattr"));

/** Prefix of the xattrs that carry E2B file metadata. */
export const METADATA_PREFIX = "user.e2b.";

const utf8 = new TextDecoder("utf-8", { fatal: true });

function isUnsupported(err: unknown): boolean {
  const text = String((err as Error)?.message ?? err);
  return /ENOTSUP|EOPNOTSUPP|not supported|ENODATA|ENOENT|No such/i.test(text);
}

/**
 * Reads the `user.e2b.*` xattrs of a path (prefix stripped). Keys or values that are not
 * valid UTF-8 are skipped; unsupported filesystems and read errors yield what could be read.
 */
export async function readMetadata(path: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  let names: string[];
  try {
    names = await napi().listAttributes(path);
  } catch {
    return out;
  }
  for (const name of names) {
    if (!name.startsWith(METADATA_PREFIX)) continue;
    try {
      const value = await napi().getAttribute(path, name);
      if (value) out[name.slice(METADATA_PREFIX.length)] = utf8.decode(value);
    } catch {
      // unreadable or not UTF-8: skipped, as the reference does
    }
  }
  return out;
}

/**
 * Makes the `user.e2b.*` xattrs of a path exactly `meta`: stale keys are removed, new ones set.
 * Returns false when the filesystem has no xattr support; other errors (ENOSPC, ...) are thrown.
 */
export async function replaceMetadata(path: string, meta: Record<string, string>): Promise<boolean> {
  let names: string[];
  try {
    names = await napi().listAttributes(path);
  } catch (err) {
    if (isUnsupported(err)) return false;
    throw err;
  }
  for (const name of names) {
    if (name.startsWith(METADATA_PREFIX) && !(name.slice(METADATA_PREFIX.length) in meta)) {
      await napi().removeAttribute(path, name).catch(() => undefined);
    }
  }
  for (const [key, value] of Object.entries(meta)) {
    try {
      await napi().setAttribute(path, METADATA_PREFIX + key, value);
    } catch (err) {
      if (/ENOTSUP|EOPNOTSUPP|not supported/i.test(String((err as Error)?.message))) return false;
      throw err;
    }
  }
  return true;
}

/** Synchronous readMetadata, for callers that must describe an entry at the instant an event is handled. */
export function readMetadataSync(path: string): Record<string, string> {
  const out: Record<string, string> = {};
  let names: string[];
  try {
    names = napi().listAttributesSync(path);
  } catch {
    return out;
  }
  for (const name of names) {
    if (!name.startsWith(METADATA_PREFIX)) continue;
    try {
      const value = napi().getAttributeSync(path, name);
      if (value) out[name.slice(METADATA_PREFIX.length)] = utf8.decode(value);
    } catch {
      // unreadable or not UTF-8: skipped, as the reference does
    }
  }
  return out;
}

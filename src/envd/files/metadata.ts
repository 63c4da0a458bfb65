import type { IncomingHttpHeaders } from "node:http";
import { HttpError } from "../http/errors.js";
import { METADATA_PREFIX } from "../filesystem/xattr.js";

const HEADER_PREFIX = "x-metadata-";
/** Longest key: 255-byte xattr names minus the `user.e2b.` prefix. */
export const MAX_METADATA_KEY_BYTES = 246;
/** Largest sum of prefixed names and values across one upload's metadata. */
export const MAX_METADATA_TOTAL_BYTES = 4096;

const PRINTABLE = /^[\x20-\x7e]*$/;

/**
 * Collects `X-Metadata-*` headers into `user.e2b.*` metadata (key lower-cased, first value wins,
 * empty keys ignored) and validates it as the reference does; a violation is a 400 `invalid metadata: ...`.
 * `distinct` is Node's headersDistinct, which keeps repeated values apart.
 */
export function metadataFromHeaders(distinct: Record<string, string[] | undefined> | IncomingHttpHeaders): Record<string, string> {
  const meta: Record<string, string> = {};
  for (const [name, values] of Object.entries(distinct)) {
    if (!name.toLowerCase().startsWith(HEADER_PREFIX)) continue;
    const key = name.slice(HEADER_PREFIX.length).toLowerCase();
    if (key === "" || key in meta) continue;
    const first = Array.isArray(values) ? values[0] : values;
    meta[key] = first ?? "";
  }
  validateMetadata(meta);
  return meta;
}

/** Throws 400 `invalid metadata: ...` unless every key and value is within the reference's limits. */
export function validateMetadata(meta: Record<string, string>): void {
  let total = 0;
  for (const [key, value] of Object.entries(meta)) {
    if (key === "") fail("key must not be empty");
    if (Buffer.byteLength(key) > MAX_METADATA_KEY_BYTES) fail(`key '${key}' is longer than ${MAX_METADATA_KEY_BYTES} bytes`);
    if (!PRINTABLE.test(key)) fail(`key '${key}' contains characters outside printable ASCII`);
    if (!PRINTABLE.test(value)) fail(`value of key '${key}' contains characters outside printable ASCII`);
    total += METADATA_PREFIX.length + Buffer.byteLength(key) + Buffer.byteLength(value);
  }
  if (total > MAX_METADATA_TOTAL_BYTES) fail(`total size ${total} bytes exceeds the limit of ${MAX_METADATA_TOTAL_BYTES} bytes`);
}

function fail(reason: string): never {
  throw new HttpError(400, `invalid metadata: ${reason}`);
}

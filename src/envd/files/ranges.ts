import { crypto } from "../platform/crypto.js";
import { HttpError } from "../http/errors.js";
import { lazy } from "../platform/lazy.js";

const parseRange = lazy<typeof import("range-parser")>("range-parser", () => require("range-parser"));

/** One satisfiable byte range, inclusive at both ends. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * Parses a `Range` header for a resource of `size` bytes. Returns the ranges to serve, or
 * undefined when the header should be ignored (ranges larger in total than the file, as Go does);
 * throws 416 for malformed or unsatisfiable ranges (with `Content-Range: bytes *\/size` set by the caller).
 */
export function byteRanges(header: string, size: number): ByteRange[] | undefined {
  // A suffix longer than the file means the whole file (RFC 7233 §2.1); range-parser would drop it.
  const clamped = header.replace(/(^|[=,])(\s*)-(\d+)/g, (all, sep: string, ws: string, n: string) =>
    Number(n) > size && size > 0 ? `${sep}${ws}-${size}` : all,
  );
  const parsed = parseRange()(size, clamped);
  if (parsed === -2 || (Array.isArray(parsed) && parsed.type !== "bytes")) throw new HttpError(416, "invalid range");
  if (parsed === -1) throw new RangeNotSatisfiable(size);
  const ranges = parsed.map((r) => ({ start: r.start, end: r.end }));
  const total = ranges.reduce((sum, r) => sum + r.end - r.start + 1, 0);
  return total > size ? undefined : ranges;
}

/** 416 for ranges that do not overlap the file; carries the size for `Content-Range: bytes *\/size`. */
export class RangeNotSatisfiable extends HttpError {
  constructor(readonly size: number) {
    super(416, "invalid range: failed to overlap");
  }
}

/** The pieces of a multipart/byteranges body: header text before each part and the closing delimiter. */
export interface MultipartPlan {
  contentType: string;
  length: number;
  parts: Array<{ head: string; range: ByteRange }>;
  tail: string;
}

/** Lays out a multipart/byteranges response (Go's layout: CRLF between parts, closing delimiter last). */
export function planMultipart(ranges: ByteRange[], size: number, partType: string): MultipartPlan {
  const boundary = crypto().randomBytes(30).toString("hex");
  let length = 0;
  const parts = ranges.map((range, i) => {
    const head =
      (i === 0 ? "" : "\r\n") +
      `--${boundary}\r\nContent-Range: bytes ${range.start}-${range.end}/${size}\r\nContent-Type: ${partType}\r\n\r\n`;
    length += Buffer.byteLength(head) + range.end - range.start + 1;
    return { head, range };
  });
  const tail = `\r\n--${boundary}--\r\n`;
  length += Buffer.byteLength(tail);
  return { contentType: `multipart/byteranges; boundary=${boundary}`, length, parts, tail };
}

import { promisify } from "node:util";
import * as zlib from "node:zlib";
import { constants, deflateRaw, deflateRawSync } from "node:zlib";

const deflateRawAsync = promisify(deflateRaw);
/** zlib's CRC-32 (Node 22.2+; the types this project compiles against predate it). */
const crc32 = (zlib as unknown as { crc32(data: Uint8Array, value?: number): number }).crc32;

/** Bytes judged and compressed (or stored) as one piece. */
const SEGMENT = 1 << 20;
/** Bytes of a segment that a level-1 trial compresses to judge it. */
const PROBE = 8 << 10;
/** A probe that shrinks to more than this share of its size marks the segment incompressible. */
const INCOMPRESSIBLE = 0.9;
/** Largest stored deflate block (RFC 1951 §3.2.4: LEN is 16 bits). */
const STORED_MAX = 0xffff;
/** Level of compressible segments: Go's (and so the reference's) default, for sizes like its own. */
const LEVEL = 6;

/** gzip member header (RFC 1952): no name, no mtime, OS = Unix, as zlib writes it. */
const HEADER = Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0x03]);
/** The final, empty stored block that ends the deflate stream on a byte boundary. */
const FINAL_BLOCK = Buffer.from([0x01, 0x00, 0x00, 0xff, 0xff]);

/** How the segments of a stream are to be treated. */
export type GzipHint = "judge" | "store";

/**
 * Gzip whose effort follows the data: each 1 MiB segment is judged by a small level-1 trial;
 * compressible ones are deflated at level 6 on the thread pool, the rest go out as stored deflate
 * blocks (a 5-byte header per 64 KiB and a CRC: close to the speed of sending the bytes as they
 * are). Segments are independent deflate runs ended by a sync flush, so they join into one valid
 * gzip member whatever mix the file is. `hint: "store"` skips the trials (already-compressed types).
 */
export async function* adaptiveGzip(source: AsyncIterable<Buffer>, hint: GzipHint = "judge"): AsyncGenerator<Buffer> {
  yield HEADER;
  let crc = 0;
  let size = 0;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const chunk of source) {
    crc = crc32(chunk, crc);
    size += chunk.length;
    pending.push(chunk);
    pendingBytes += chunk.length;
    if (pendingBytes >= SEGMENT) {
      yield* segment(pending, pendingBytes, hint);
      pending = [];
      pendingBytes = 0;
    }
  }
  if (pendingBytes > 0) yield* segment(pending, pendingBytes, hint);
  const trailer = Buffer.allocUnsafe(8);
  trailer.writeUInt32LE(crc >>> 0, 0);
  trailer.writeUInt32LE(size % 0x1_0000_0000, 4);
  yield Buffer.concat([FINAL_BLOCK, trailer]);
}

/** One segment: deflated when a trial of its first bytes shows it shrinks, else stored chunk by chunk. */
async function* segment(chunks: Buffer[], bytes: number, hint: GzipHint): AsyncGenerator<Buffer> {
  if (hint === "judge" && compressible(chunks[0].length >= PROBE || chunks.length === 1 ? chunks[0] : Buffer.concat(chunks).subarray(0, PROBE))) {
    const data = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, bytes);
    yield await deflateRawAsync(data, { level: LEVEL, finishFlush: constants.Z_SYNC_FLUSH });
    return;
  }
  for (const chunk of chunks) yield* stored(chunk);
}

/** Whether a level-1 trial of the segment's first bytes shrinks them enough to be worth deflating. */
export function compressible(data: Buffer): boolean {
  const probe = data.subarray(0, PROBE);
  if (probe.length < 64) return true;
  const out = deflateRawSync(probe, { level: 1 });
  return out.length <= probe.length * INCOMPRESSIBLE;
}

/**
 * The bytes as non-final stored blocks: each block's 5-byte header, then its bytes as a view of
 * the chunk (copying them into fresh block buffers measured at a third of the speed).
 */
function stored(data: Buffer): Buffer[] {
  const blocks = Math.ceil(data.length / STORED_MAX);
  const headers = Buffer.allocUnsafe(5 * blocks);
  const out: Buffer[] = [];
  for (let i = 0; i < blocks; i++) {
    const piece = data.subarray(i * STORED_MAX, (i + 1) * STORED_MAX);
    const h = headers.subarray(5 * i, 5 * i + 5);
    h[0] = 0x00;
    h.writeUInt16LE(piece.length, 1);
    h.writeUInt16LE(~piece.length & 0xffff, 3);
    out.push(h, piece);
  }
  return out;
}

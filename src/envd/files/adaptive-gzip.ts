import type { FileHandle } from "node:fs/promises";
import { promisify } from "node:util";
import * as zlib from "node:zlib";
import { constants, deflateRaw, deflateRawSync } from "node:zlib";
import type { FileSender } from "./send.js";

const deflateRawAsync = promisify(deflateRaw);
/** zlib's CRC-32 (Node 22.2+; the types this project compiles against predate it). */
const crc32 = (zlib as unknown as { crc32(data: Uint8Array, value?: number): number }).crc32;

/** Largest stored deflate block (RFC 1951 §3.2.4: LEN is 16 bits). */
const BLOCK = 0xffff;
/** A stored block on the wire: BFINAL/BTYPE byte, LEN, NLEN, then up to BLOCK bytes. */
const SPAN = 5 + BLOCK;
/** Stored blocks per read. */
const BLOCKS = 4;
/** Size of the ring buffers a gzip download reads into: BLOCKS stored blocks, about 256 KiB. */
export const GZIP_READ_BUFFER = BLOCKS * SPAN;
/** Reads judged together (about 1 MiB): a segment is deflated or stored as a whole. */
const SEGMENT_READS = 4;
/** Bytes of a segment that a level-1 trial compresses to judge it. */
const PROBE = 8 << 10;
/** A probe that shrinks to more than this share of its size marks the segment incompressible. */
const INCOMPRESSIBLE = 0.9;
/**
 * Level of compressible segments. Level 5 searches a quarter of level 6's match chains (the
 * reference's default): on source code, JSON, prose and logs its output measured 1.01–1.03× the
 * size of level 6 at 1.4–2.2× the speed. Lower levels measured up to 1.26× (level 1 on source
 * code) and 1.44× (level 4 on a very repetitive log).
 */
export const GZIP_LEVEL = 5;

/** gzip member header (RFC 1952): no name, no mtime, OS = Unix, as zlib writes it. */
const HEADER = Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0x03]);
/** The final, empty stored block that ends the deflate stream on a byte boundary. */
const FINAL_BLOCK = [0x01, 0x00, 0x00, 0xff, 0xff];

/** How the segments of a stream are to be treated. */
export type GzipHint = "judge" | "store";

/** What the encoder reads: an open file (or anything that reads like one into several buffers). */
export type GzipSource = Pick<FileHandle, "readv">;

/**
 * Sends a file as one gzip member whose effort follows the data. Every read lands in a ring
 * buffer laid out as stored deflate blocks, each file block just after a 5-byte gap for its
 * header: storing costs filling in the headers and one write of the buffer as it is (no copy,
 * one HTTP chunk per read). Each segment of SEGMENT_READS reads is judged by a level-1 trial
 * of its first bytes; a compressible one is copied out and deflated at GZIP_LEVEL on the thread
 * pool instead. Segments are independent deflate runs ended on a byte boundary (stored blocks
 * are; deflate runs end with a sync flush), so they join into one valid stream whatever mix
 * the file is. `hint: "store"` skips the trials (already-compressed types).
 */
export async function sendGzip(out: FileSender, source: GzipSource, hint: GzipHint = "judge"): Promise<void> {
  await out.write(HEADER);
  let crc = 0;
  let size = 0;
  let reads = 0;
  let deflating = false;
  let segment: Buffer | undefined;
  let held = 0;
  const flush = async (): Promise<void> => {
    if (held === 0) return;
    await out.write(await deflateRawAsync(segment!.subarray(0, held), { level: GZIP_LEVEL, finishFlush: constants.Z_SYNC_FLUSH }));
    held = 0;
  };
  for (;;) {
    const buf = await out.take();
    let n: number;
    try {
      // No position: from the file's current offset, as a stream of the whole file reads it.
      ({ bytesRead: n } = await source.readv(blockViews(buf)));
    } catch (err) {
      out.give(buf);
      throw err;
    }
    if (n === 0) {
      out.give(buf);
      break;
    }
    const data = filled(buf, n);
    for (const d of data) crc = crc32(d, crc);
    size += n;
    if (reads++ % SEGMENT_READS === 0) {
      await flush();
      deflating = hint === "judge" && compressible(data[0]);
    }
    if (deflating) {
      segment ??= Buffer.allocUnsafeSlow(SEGMENT_READS * BLOCKS * BLOCK);
      for (const d of data) held += d.copy(segment, held);
      out.give(buf);
    } else {
      await out.send(frameStored(buf, n), buf);
    }
  }
  await flush();
  const end = Buffer.from([...FINAL_BLOCK, 0, 0, 0, 0, 0, 0, 0, 0]);
  end.writeUInt32LE(crc >>> 0, 5);
  end.writeUInt32LE(size % 0x1_0000_0000, 9);
  await out.write(end);
}

/** Whether a level-1 trial of the data's first bytes shrinks them enough to be worth deflating. */
export function compressible(data: Buffer): boolean {
  const probe = data.subarray(0, PROBE);
  if (probe.length < 64) return true;
  // An 8 KiB window covers the whole probe, and zlib sets it up in ~60 % of the default's time.
  const out = deflateRawSync(probe, { level: 1, windowBits: 13 });
  return out.length <= probe.length * INCOMPRESSIBLE;
}

/** Where a read puts the file's bytes in a ring buffer: each block's place after its header gap. */
function blockViews(buf: Buffer): Buffer[] {
  const views: Buffer[] = [];
  for (let at = 0; at + SPAN <= buf.length; at += SPAN) views.push(buf.subarray(at + 5, at + SPAN));
  return views;
}

/** The blocks' file bytes after a read of `n` bytes (the last one may be short). */
function filled(buf: Buffer, n: number): Buffer[] {
  const data: Buffer[] = [];
  for (let at = 0, left = n; left > 0; at += SPAN, left -= BLOCK) data.push(buf.subarray(at + 5, at + 5 + Math.min(left, BLOCK)));
  return data;
}

/**
 * Fills in the non-final stored block headers (RFC 1951 §3.2.4: BTYPE 00, LEN, one's
 * complement NLEN) before the `n` bytes a read put in the buffer; returns the blocks.
 */
export function frameStored(buf: Buffer, n: number): Buffer {
  let at = 0;
  for (let left = n; ; at += SPAN, left -= BLOCK) {
    const len = Math.min(left, BLOCK);
    buf[at] = 0x00;
    buf.writeUInt16LE(len, at + 1);
    buf.writeUInt16LE(~len & 0xffff, at + 3);
    if (left <= BLOCK) return buf.subarray(0, at + 5 + len);
  }
}

import type { FileHandle } from "node:fs/promises";

/** Read size for streamed file bodies: big enough for throughput, small enough to keep memory flat. */
export const STREAM_CHUNK = 256 * 1024;

/**
 * Reads a file in chunks: bytes `start..end` (inclusive) by position, or, without a start,
 * from the current offset until EOF (pipes, devices, procfs). Every read has finished before
 * the generator returns, so the handle can be closed right after. With `reuse`, every chunk
 * is a view of that one buffer, valid only until the consumer asks for the next one (a
 * consumer that awaits each chunk's write allocates nothing per chunk).
 */
export async function* readChunks(fh: FileHandle, start?: number, end = Infinity, reuse?: Buffer): AsyncGenerator<Buffer> {
  let pos = start;
  const size = reuse?.length ?? STREAM_CHUNK;
  while (pos === undefined || pos <= end) {
    const want = pos === undefined ? size : Math.min(size, end - pos + 1);
    const buf = reuse ?? Buffer.allocUnsafe(want);
    const { bytesRead } = await fh.read(buf, 0, want, pos ?? null);
    if (bytesRead === 0) return;
    if (pos !== undefined) pos += bytesRead;
    yield buf.subarray(0, bytesRead);
  }
}

/** Writes a whole buffer at the current offset, looping over short writes. */
export async function writeAll(fh: FileHandle, chunk: Buffer): Promise<void> {
  let off = 0;
  while (off < chunk.length) {
    const { bytesWritten } = await fh.write(chunk, off, chunk.length - off);
    off += bytesWritten;
  }
}

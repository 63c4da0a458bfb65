import type { FileHandle } from "node:fs/promises";
import { STREAM_CHUNK } from "./io.js";

/** What a file is sent to: an HTTP/1.1 or HTTP/2 response (or any Writable). */
export interface Sink {
  write(chunk: Buffer, cb: (err?: Error | null) => void): boolean;
  end(): unknown;
  on(event: "drain" | "close" | "finish" | "error", listener: (err?: Error) => void): unknown;
  off(event: "drain" | "close" | "finish" | "error", listener: (err?: Error) => void): unknown;
}

/** Read buffers per transfer: one being read while the ones before it are still being written. */
const RING = 3;

/** The response closed before the whole body was written (the client went away). */
export class SinkClosed extends Error {
  constructor() {
    super("response closed before the body was sent");
  }
}

/**
 * Streams file bytes into a response through a small ring of reused read buffers: a buffer
 * goes back to the ring once the response has called back for its chunk (the chunk is then
 * flushed), so a transfer allocates nothing per chunk. Fresh 256 KiB buffers per read made
 * V8 run a full mark-compact every few tens of MiB (external memory pressure), which cost the
 * daemon, with its bigger heap, more CPU than reading and sending the bytes. The next read
 * overlaps the previous write; a write waits for 'drain' when the response asked for it.
 */
export class FileSender {
  private readonly free: Buffer[] = [];
  private allocated = 0;
  private needDrain = false;
  private ended = false;
  private finished = false;
  private failure: Error | undefined;
  private wake: (() => void) | undefined;

  constructor(
    private readonly sink: Sink,
    private readonly chunk = STREAM_CHUNK,
  ) {
    sink.on("drain", this.onDrain);
    sink.on("close", this.onClose);
    sink.on("finish", this.onFinish);
    sink.on("error", this.onError);
  }

  /** Writes a small prepared buffer (a multipart head, a sniffed prefix) in order with the file chunks. */
  async write(buf: Buffer): Promise<void> {
    await this.until(() => !this.needDrain);
    this.needDrain = !this.sink.write(buf, this.onWritten);
  }

  /**
   * Sends bytes `start..end` (inclusive) read by position, or, without a start, from the
   * handle's current offset to EOF. Every read has finished when this settles.
   */
  async copy(fh: FileHandle, start?: number, end = Infinity): Promise<void> {
    let pos = start;
    while (pos === undefined || pos <= end) {
      const buf = await this.take();
      const want = pos === undefined ? buf.length : Math.min(buf.length, end - pos + 1);
      let bytesRead: number;
      try {
        ({ bytesRead } = await fh.read(buf, 0, want, pos ?? null));
      } catch (err) {
        this.give(buf);
        throw err;
      }
      if (bytesRead === 0) {
        this.give(buf);
        return;
      }
      if (pos !== undefined) pos += bytesRead;
      await this.send(buf.subarray(0, bytesRead), buf);
    }
  }

  /**
   * A read buffer of the ring (`chunk` bytes): the next one free, a new one while fewer than
   * the ring's size exist, else the first to come back. Goes back through send() or give().
   */
  async take(): Promise<Buffer> {
    if (this.free.length === 0 && this.allocated < RING) {
      this.allocated++;
      return Buffer.allocUnsafeSlow(this.chunk);
    }
    await this.until(() => this.free.length > 0);
    return this.free.pop()!;
  }

  /** Returns a buffer from take() that was not sent. */
  give(buf: Buffer): void {
    this.free.push(buf);
  }

  /**
   * Writes `view` (bytes of `buf`, a buffer from take()) once the response has room, and gives
   * `buf` back to the ring when the response has called back for it.
   */
  async send(view: Buffer, buf: Buffer): Promise<void> {
    await this.until(() => !this.needDrain);
    this.needDrain = !this.sink.write(view, (err) => {
      this.onWritten(err);
      this.release(buf);
    });
  }

  /** Ends the response and waits until it has flushed; stops listening either way. */
  async finish(): Promise<void> {
    try {
      this.check();
      this.ended = true;
      this.sink.end();
      await this.until(() => this.finished);
    } finally {
      this.detach();
    }
  }

  /** Stops listening to the response (after a failure; finish() does it itself). */
  detach(): void {
    this.sink.off("drain", this.onDrain);
    this.sink.off("close", this.onClose);
    this.sink.off("finish", this.onFinish);
    this.sink.off("error", this.onError);
  }

  private release(buf: Buffer): void {
    // After a failure the response may still hold the chunk: the buffer is not reused then.
    if (this.failure) return;
    this.free.push(buf);
    this.signal();
  }

  /** Waits until `ready()` holds; throws once the response has failed or closed early. */
  private async until(ready: () => boolean): Promise<void> {
    for (;;) {
      this.check();
      if (ready()) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  private check(): void {
    if (this.failure) throw this.failure;
  }

  private signal(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private readonly onDrain = (): void => {
    this.needDrain = false;
    this.signal();
  };

  private readonly onFinish = (): void => {
    // The HTTP/2 compat response also says 'finish' when its stream is reset mid-body.
    if (this.ended) this.finished = true;
    else this.failure ??= new SinkClosed();
    this.signal();
  };

  private readonly onWritten = (err?: Error | null): void => {
    if (err) this.onError(err);
  };

  private readonly onClose = (): void => {
    if (!this.finished) this.failure ??= new SinkClosed();
    this.signal();
  };

  private readonly onError = (err?: Error): void => {
    this.failure ??= err ?? new SinkClosed();
    this.signal();
  };
}

/** Writes a body with a FileSender of `chunk`-byte buffers and ends the response; on failure the caller destroys it. */
export async function sendBody(sink: Sink, body: (out: FileSender) => Promise<void>, chunk = STREAM_CHUNK): Promise<void> {
  const out = new FileSender(sink, chunk);
  try {
    await body(out);
    await out.finish();
  } finally {
    out.detach();
  }
}

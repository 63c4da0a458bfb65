/**
 * The Connect protocol's envelopes as sandboxd reads and writes them on envd's streams: one
 * request envelope out, a bounded reader of the answer's envelopes in.
 */
import { EnvdProtocolError } from "./bounded-read.js";

/** One Connect-protocol envelope (flags, big-endian length, JSON). */
export function envelope(msg: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(msg));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

/** The largest Connect message sandboxd takes from envd: its process events are a few KiB at most. */
const MAX_MESSAGE = 1024 * 1024;

/** A process event or the stream's end message, as far as sandboxd reads them. */
export type StreamMessage = { event?: { start?: unknown; end?: { exitCode?: number; error?: string } }; error?: { message?: string } };

/**
 * Splits a Connect envelope stream into messages, holding at most one message (bounded) and the
 * bytes of the next: a hostile envd announcing a huge length or streaming without end costs
 * sandboxd at most `MAX_MESSAGE` of memory, then fails the operation.
 */
export class Envelopes {
  private chunks: Buffer[] = [];
  private size = 0;

  /** Adds bytes read from the stream. */
  push(chunk: Uint8Array): void {
    this.chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.size += chunk.byteLength;
  }

  /** The next whole message (flags, parsed JSON), or undefined until more bytes arrive. */
  next(): { flags: number; msg: StreamMessage } | undefined {
    if (this.size < 5) return undefined;
    const buf = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.size);
    this.chunks = [buf];
    const len = buf.readUInt32BE(1);
    if (len > MAX_MESSAGE) throw new EnvdProtocolError(`envd sent a message of ${len} bytes (more than ${MAX_MESSAGE})`);
    if (buf.length < 5 + len) return undefined;
    const flags = buf[0];
    let msg: StreamMessage;
    try {
      msg = JSON.parse(buf.subarray(5, 5 + len).toString("utf8")) as StreamMessage;
    } catch {
      throw new EnvdProtocolError("envd sent a message that is not JSON");
    }
    if (msg === null || typeof msg !== "object") throw new EnvdProtocolError("envd sent a message that is not a JSON object");
    const rest = buf.subarray(5 + len);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.size = rest.length;
    return { flags, msg };
  }
}

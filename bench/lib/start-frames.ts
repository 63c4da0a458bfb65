import { fromBinary } from "@bufbuild/protobuf";
import { StartResponseSchema } from "../../src/envd/gen/process/process_pb.js";
import { addonExtra } from "../../src/envd/platform/addon.js";

/** Longest protobuf prefix of a data event: three tags and three 5-byte varints. */
const DATA_PREFIX_MAX = 18;

function varint(b: Buffer, pos: number): [number, number] | undefined {
  let n = 0;
  for (let shift = 0, i = pos; i < b.length && shift < 35; i++, shift += 7) {
    n += (b[i] & 0x7f) * 2 ** shift;
    if (b[i] < 0x80) return [n, i + 1];
  }
  return undefined;
}

/**
 * Decodes the head of a binary StartResponse message of `len` bytes when it is a data event:
 * `event` (field 1) holding `data` (field 2) holding `stdout|stderr|pty` (fields 1-3), every
 * length consistent with `len`. Returns the prefix size and the payload size, "more" when too
 * few bytes are here to tell, or undefined for any other message (decoded whole by protobuf-es).
 */
function dataPrefix(m: Buffer, len: number): { prefix: number; payload: number } | "more" | undefined {
  if (m.length < Math.min(len, DATA_PREFIX_MAX)) return "more";
  if (m[0] !== 0x0a) return undefined;
  const event = varint(m, 1);
  if (!event || event[1] + event[0] !== len || m[event[1]] !== 0x12) return undefined;
  const data = varint(m, event[1] + 1);
  if (!data || data[1] + data[0] !== len || ![0x0a, 0x12, 0x1a].includes(m[data[1]])) return undefined;
  const payload = varint(m, data[1] + 1);
  if (!payload || payload[1] + payload[0] !== len) return undefined;
  return { prefix: payload[1], payload: payload[0] };
}

const STDOUT_HEAD = Buffer.from(`{"event":{"data":{"stdout":"`);
const STDOUT_TAIL = Buffer.from(`"}}}`);

/**
 * The base64 text of a `{"event":{"data":{"stdout":"…"}}}` message exactly as the daemon
 * writes it (compact, no escapes: base64 has none), or undefined for any other message, which
 * then goes through JSON.parse.
 */
function stdoutBase64(msg: Buffer): Buffer | undefined {
  const h = STDOUT_HEAD.length;
  const t = STDOUT_TAIL.length;
  if (msg.length < h + t || msg.compare(STDOUT_HEAD, 0, h, 0, h) !== 0 || msg.compare(STDOUT_TAIL, 0, t, msg.length - t) !== 0) return undefined;
  return msg.subarray(h, msg.length - t);
}

let scratch = Buffer.alloc(0);
const native = addonExtra("base64Decode");

/** Decodes base64 text (strictly) and returns the byte count, or -1 when it is not valid base64. */
function decodeBase64(text: Buffer): number {
  const max = Math.ceil(text.length / 4) * 3;
  if (scratch.length < max) scratch = Buffer.allocUnsafe(max);
  if (native) return native(text, scratch);
  // Without the addon: Node's decoder (lenient, so validate the alphabet first).
  const s = text.toString("latin1");
  if (text.length % 4 !== 0 || /[^A-Za-z0-9+/=]/.test(s)) return -1;
  return Buffer.from(s, "base64").length;
}

/** What a lean Start read delivered. */
export interface LeanOutcome {
  bytes: number;
  frames: number;
  exitCode: number;
  /** CPU seconds this process spent reading (user + system). */
  clientCpu: number;
}

/**
 * Splits a Start answer's body into Connect frames and decodes every one (binary: data events by
 * their protobuf framing, tags and lengths checked and the payload counted as it arrives without
 * copying it, other messages by protobuf-es; JSON: stdout messages in the daemon's exact compact
 * shape by our addon's strict base64 decoder, others by JSON.parse), counting stdout bytes.
 * `push` may be given a buffer its caller reuses: what is kept between pushes (a frame's head, a
 * whole non-data frame) is copied into one assembly buffer that grows to the largest frame.
 */
export class StartFrames {
  readonly out: LeanOutcome = { bytes: 0, frames: 0, exitCode: NaN, clientCpu: 0 };
  /** Whether the end-of-stream frame (without an error) has been read. */
  ended = false;
  private acc = Buffer.allocUnsafe(64 * 1024);
  private accLen = 0;
  /** Payload bytes of a binary data frame still to come: counted and dropped as they arrive. */
  private skip = 0;

  constructor(
    private readonly binary: boolean,
    private readonly onStart?: () => void,
  ) {}

  /** Takes the next body bytes; throws on a malformed frame or an error end-of-stream. */
  push(chunk: Buffer): void {
    let pos = 0;
    while (pos < chunk.length) {
      if (this.skip > 0) pos += this.skipped(chunk.length - pos);
      else if (this.accLen === 0) {
        const used = this.step(chunk, pos, chunk.length);
        if (used === 0) {
          this.append(chunk, pos, chunk.length);
          return;
        }
        pos += used;
      } else {
        const take = Math.min(this.needed(), chunk.length - pos);
        this.append(chunk, pos, pos + take);
        pos += take;
        this.drainAcc();
      }
    }
  }

  /** The outcome once the body has ended; throws when it ended inside a frame or before the end. */
  finish(): LeanOutcome {
    if (this.accLen > 0 || this.skip > 0) throw new Error("the stream ended inside a frame");
    if (!this.ended) throw new Error("the stream ended without an end-of-stream frame");
    return this.out;
  }

  /** Bytes to add to the assembly buffer before a step there can make progress. */
  private needed(): number {
    if (this.accLen < 5 + DATA_PREFIX_MAX) return 5 + DATA_PREFIX_MAX - this.accLen;
    return Math.max(1, 5 + this.acc.readUInt32BE(1) - this.accLen);
  }

  /** Runs every step the assembly buffer allows, moving what is left to its front. */
  private drainAcc(): void {
    let at = 0;
    while (at < this.accLen) {
      if (this.skip > 0) {
        at += this.skipped(this.accLen - at);
        continue;
      }
      const used = this.step(this.acc, at, this.accLen);
      if (used === 0) break;
      at += used;
    }
    this.acc.copyWithin(0, at, this.accLen);
    this.accLen -= at;
  }

  /** Drops up to `available` bytes of a data payload still to come; returns how many. */
  private skipped(available: number): number {
    const n = Math.min(this.skip, available);
    this.skip -= n;
    return n;
  }

  private append(b: Buffer, from: number, to: number): void {
    const n = to - from;
    if (this.accLen + n > this.acc.length) {
      const grown = Buffer.allocUnsafe(Math.max(2 * this.acc.length, this.accLen + n));
      this.acc.copy(grown, 0, 0, this.accLen);
      this.acc = grown;
    }
    b.copy(this.acc, this.accLen, from, to);
    this.accLen += n;
  }

  /** Reads one frame (or a data frame's head) at `pos`; returns the bytes used, 0 if too few. */
  private step(b: Buffer, pos: number, end: number): number {
    if (end - pos < 5) return 0;
    const flags = b[pos];
    const len = b.readUInt32BE(pos + 1);
    if (this.binary && flags === 0) {
      const d = dataPrefix(b.subarray(pos + 5, Math.min(end, pos + 5 + DATA_PREFIX_MAX)), len);
      if (d === "more") return 0;
      if (d) {
        // A data event: its protobuf framing checked, its payload counted, not copied.
        this.out.frames++;
        this.out.bytes += d.payload;
        this.skip = d.payload;
        return 5 + d.prefix;
      }
    }
    if (end - pos < 5 + len) return 0;
    this.frame(flags, b.subarray(pos + 5, pos + 5 + len));
    return 5 + len;
  }

  private frame(flags: number, data: Buffer): void {
    const out = this.out;
    out.frames++;
    if (flags & 2) {
      const end = JSON.parse(data.toString("utf8")) as { error?: { code: string; message?: string } };
      if (end.error) throw new Error(`stream ended with ${end.error.code}: ${end.error.message ?? ""}`);
      this.ended = true;
      return;
    }
    if (this.binary) {
      const ev = fromBinary(StartResponseSchema, data).event?.event;
      if (ev?.case === "data") out.bytes += ev.value.output.value?.byteLength ?? 0;
      else if (ev?.case === "end") out.exitCode = ev.value.exitCode;
      else if (ev?.case === "start") this.onStart?.();
      return;
    }
    const fast = stdoutBase64(data);
    if (fast) {
      const n = decodeBase64(fast);
      if (n < 0) throw new Error("data event with invalid base64");
      out.bytes += n;
      return;
    }
    const ev = (JSON.parse(data.toString("latin1")) as { event?: Record<string, { stdout?: string; exitCode?: number }> }).event ?? {};
    if (ev.data) {
      if (typeof ev.data.stdout !== "string") throw new Error("data event without stdout");
      out.bytes += Buffer.from(ev.data.stdout, "base64").length;
    } else if (ev.end) out.exitCode = ev.end.exitCode ?? 0;
    else if (ev.start) this.onStart?.();
  }
}

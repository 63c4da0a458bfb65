import type { ProcessEvent } from "../gen/process/process_pb.js";
import type { Frame } from "../stream/contract.js";
import { addonExtra, type AddonExtras } from "../platform/addon.js";
import { BufferPool } from "../platform/buffer-pool.js";
import { chunksOf } from "./events.js";

/**
 * Hand-written Connect stream frames for output events, the one message that carries bulk
 * bytes. protobuf-es would copy a chunk into a growing buffer, shift it for each length
 * prefix and slice it out again, and connect-es copies it once more into the envelope; here
 * the payload is referenced as is (binary) or base64-encoded once (JSON). Every other event
 * returns undefined and takes the generic path. Byte-for-byte equality with toBinary and
 * toJsonString is checked by test/frames.test.ts.
 *
 * Wire shape (process.proto): StartResponse/ConnectResponse { ProcessEvent event = 1 },
 * ProcessEvent { DataEvent data = 2 }, DataEvent { bytes stdout = 1 | stderr = 2 | pty = 3 }.
 */

/** Payloads up to this size are copied into the header's buffer: one write instead of two. */
const INLINE_BYTES = 16 * 1024;

const FIELD_NO = { stdout: 1, stderr: 2, pty: 3 } as const;

/**
 * The frame pieces of a `{ event: ProcessEvent }` response, or undefined when it is not a data
 * event. `written` releases the event's read slabs: the writer calls it once the pieces reached
 * the kernel.
 */
export function processEventFrame(message: unknown, binary: boolean): Frame | undefined {
  const event = (message as { event?: ProcessEvent }).event?.event;
  // The end event is the last of its stream (stream.ts).
  if (event?.case === "start" || event?.case === "end" || event?.case === "keepalive") return { pieces: [smallEventFrame(event, binary)], last: event.case === "end" };
  if (event?.case !== "data") return undefined;
  const output = event.value.output;
  if (output.case === undefined) return undefined;
  // Reading output.value of a chunked event would join its reads: take them as they are.
  const parts = chunksOf(event.value) ?? { chunks: [output.value], length: output.value.byteLength };
  const lease = parts.lease;
  if (binary) return { pieces: binaryFrame(FIELD_NO[output.case], parts.chunks, parts.length), written: lease && (() => lease.release()) };
  const json = jsonFrame(output.case, parts.chunks, parts.length);
  // The reads were encoded into the frame: their slabs are free already.
  lease?.release();
  return { pieces: [json.frame], written: json.pooled && (() => jsonPool.give(json.pooled!)) };
}

type SmallEvent = Extract<ProcessEvent["event"], { case: "start" | "end" | "keepalive" }>;

/**
 * The frame of a start, end or keep-alive event, as protobuf-es and connect-es would build it
 * (fields by number, defaults left out; JSON keys in the same order, strings by JSON.stringify):
 * every Start sends two of them, and the reflective path cost more than the rest of their trip.
 */
function smallEventFrame(event: SmallEvent, binary: boolean): Buffer {
  if (!binary) return envelope(Buffer.from(JSON.stringify({ event: { [event.case]: smallEventJson(event) } })));
  const fields: Buffer[] = [];
  if (event.case === "start") {
    if (event.value.pid !== 0) fields.push(tagged(0x08, varint(event.value.pid))); // StartEvent.pid, uint32
  } else if (event.case === "end") {
    const e = event.value;
    if (e.exitCode !== 0) fields.push(tagged(0x08, varint(((e.exitCode << 1) ^ (e.exitCode >> 31)) >>> 0))); // EndEvent.exit_code, sint32
    if (e.exited) fields.push(tagged(0x10, varint(1))); // EndEvent.exited, bool
    if (e.status !== "") fields.push(tagged(0x1a, lengthDelimited(Buffer.from(e.status)))); // EndEvent.status
    if (e.error !== undefined) fields.push(tagged(0x22, lengthDelimited(Buffer.from(e.error)))); // EndEvent.error, optional
  }
  const caseTag = event.case === "start" ? 0x0a : event.case === "end" ? 0x1a : 0x22; // ProcessEvent.start / end / keepalive
  const processEvent = tagged(caseTag, lengthDelimited(Buffer.concat(fields)));
  return envelope(tagged(0x0a, lengthDelimited(processEvent))); // StartResponse.event
}

function smallEventJson(event: SmallEvent): Record<string, unknown> {
  if (event.case === "keepalive") return {};
  if (event.case === "start") return event.value.pid !== 0 ? { pid: event.value.pid } : {};
  const e = event.value;
  const json: Record<string, unknown> = {};
  if (e.exitCode !== 0) json.exitCode = e.exitCode;
  if (e.exited) json.exited = true;
  if (e.status !== "") json.status = e.status;
  if (e.error !== undefined) json.error = e.error;
  return json;
}

function envelope(message: Buffer): Buffer {
  const head = Buffer.allocUnsafe(5);
  head[0] = 0;
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

function varint(n: number): Buffer {
  const out = Buffer.allocUnsafe(varintSize(n));
  writeVarint(out, 0, n);
  return out;
}

function tagged(tag: number, value: Buffer): Buffer {
  return Buffer.concat([Buffer.from([tag]), value]);
}

function lengthDelimited(bytes: Buffer): Buffer {
  return Buffer.concat([varint(bytes.length), bytes]);
}

/** One frame over the payload `chunks` (n bytes in all), which are referenced, not copied, unless small. */
function binaryFrame(fieldNo: number, chunks: readonly Uint8Array[], n: number): Uint8Array[] {
  const dataLen = 1 + varintSize(n) + n;
  const eventLen = 1 + varintSize(dataLen) + dataLen;
  const messageLen = 1 + varintSize(eventLen) + eventLen;
  const headerLen = 5 + messageLen - n;
  const inline = n <= INLINE_BYTES;
  const buf = Buffer.allocUnsafe(inline ? headerLen + n : headerLen);
  buf[0] = 0;
  buf.writeUInt32BE(messageLen, 1);
  let pos = 5;
  buf[pos++] = 0x0a; // StartResponse.event, length-delimited
  pos = writeVarint(buf, pos, eventLen);
  buf[pos++] = 0x12; // ProcessEvent.data, length-delimited
  pos = writeVarint(buf, pos, dataLen);
  buf[pos++] = (fieldNo << 3) | 2; // DataEvent.<kind>, length-delimited
  pos = writeVarint(buf, pos, n);
  if (!inline) return [buf, ...chunks];
  for (const c of chunks) {
    buf.set(c, pos);
    pos += c.byteLength;
  }
  return [buf];
}

/** Big JSON frames are written into reused buffers (room for the largest pipe event). */
const jsonPool = new BufferPool(384 * 1024, 8);

/**
 * `{"event":{"data":{"<kind>":"<base64>"}}}` in one buffer, the base64 written read by read;
 * a big frame is built in a pooled buffer, given back (`pooled`) once written out.
 */
function jsonFrame(kind: keyof typeof FIELD_NO, chunks: readonly Uint8Array[], n: number): { frame: Buffer; pooled?: Buffer } {
  const head = `{"event":{"data":{"${kind}":"`;
  const tail = `"}}}`;
  const messageLen = head.length + 4 * Math.ceil(n / 3) + tail.length;
  const pooled = messageLen > INLINE_BYTES && 5 + messageLen <= jsonPool.size ? jsonPool.take() : undefined;
  const buf = pooled ? pooled.subarray(0, 5 + messageLen) : Buffer.allocUnsafe(5 + messageLen);
  buf[0] = 0;
  buf.writeUInt32BE(messageLen, 1);
  let pos = 5 + buf.write(head, 5, "latin1");
  pos = writeBase64(buf, pos, chunks);
  buf.write(tail, pos, "latin1");
  return { frame: buf, pooled };
}

/**
 * Writes the base64 of the concatenated `chunks` at `pos` without joining them: each read is
 * encoded in whole 3-byte groups, and a group split across two reads is encoded on its own.
 */
function writeBase64(buf: Buffer, pos: number, chunks: readonly Uint8Array[]): number {
  let carry: number[] = [];
  for (const chunk of chunks) {
    const c = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let start = 0;
    if (carry.length > 0) {
      while (carry.length < 3 && start < c.length) carry.push(c[start++]);
      if (carry.length < 3) continue;
      pos += encodeBase64(Buffer.from(carry), buf, pos);
      carry = [];
    }
    const end = start + (c.length - start) - ((c.length - start) % 3);
    if (end > start) pos += encodeBase64(c.subarray(start, end), buf, pos);
    for (let i = end; i < c.length; i++) carry.push(c[i]);
  }
  if (carry.length > 0) pos += encodeBase64(Buffer.from(carry), buf, pos);
  return pos;
}

/**
 * Base64 of `src` written at `pos`: by the addon straight into the frame when it is there,
 * else through a JS string (which V8 builds in its heap, and Buffer#write copies again).
 */
function encodeBase64(src: Buffer, buf: Buffer, pos: number): number {
  nativeEncode ??= addonExtra("base64Encode") ?? null;
  return nativeEncode ? nativeEncode(src, buf, pos) : buf.write(src.toString("base64"), pos, "latin1");
}

let nativeEncode: AddonExtras["base64Encode"] | null | undefined;

function varintSize(n: number): number {
  let size = 1;
  while (n > 0x7f) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

function writeVarint(buf: Buffer, pos: number, n: number): number {
  while (n > 0x7f) {
    buf[pos++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[pos++] = n;
  return pos;
}

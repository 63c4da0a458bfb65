import type { ProcessEvent } from "../gen/process/process_pb.js";
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

/** The frame pieces of a `{ event: ProcessEvent }` response, or undefined when it is not a data event. */
export function processEventFrame(message: unknown, binary: boolean): Uint8Array[] | undefined {
  const event = (message as { event?: ProcessEvent }).event?.event;
  if (event?.case !== "data") return undefined;
  const output = event.value.output;
  if (output.case === undefined) return undefined;
  if (!binary) return jsonFrame(output.case, output.value);
  const parts = chunksOf(event.value);
  return parts ? binaryFrame(FIELD_NO[output.case], parts.chunks, parts.length) : binaryFrame(FIELD_NO[output.case], [output.value], output.value.byteLength);
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

function jsonFrame(kind: keyof typeof FIELD_NO, payload: Uint8Array): Uint8Array[] {
  const b64 = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString("base64");
  const head = `{"event":{"data":{"${kind}":"`;
  const tail = `"}}}`;
  const messageLen = head.length + b64.length + tail.length;
  const buf = Buffer.allocUnsafe(5 + messageLen);
  buf[0] = 0;
  buf.writeUInt32BE(messageLen, 1);
  let pos = 5 + buf.write(head, 5, "latin1");
  pos += buf.write(b64, pos, "latin1");
  buf.write(tail, pos, "latin1");
  return [buf];
}

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

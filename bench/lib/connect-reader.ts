import http from "node:http";
import { fromBinary, toBinary, create } from "@bufbuild/protobuf";
import { StartRequestSchema, StartResponseSchema } from "../../src/gen/process/process_pb.js";
import { addonExtra } from "../../src/system/addon.js";

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
 * A lean Connect client for Process.Start over HTTP/1.1: it splits frames itself and decodes
 * every one (binary: data events by their protobuf framing, tags and lengths checked and the
 * payload counted as it arrives without joining it, other messages by protobuf-es; JSON: JSON.parse
 * and Buffer's base64; stdout messages in the daemon's exact compact shape skip JSON.parse and
 * are decoded by our addon's strict base64 decoder), checking shapes and counting stdout bytes. It measures what the
 * daemon can stream when the client is not the bottleneck: connect-node's own reader costs
 * several CPU seconds per GiB (envelope reassembly copies; for JSON, protobuf-es's fromJson
 * scans every string for duplicate keys), on the same two cores as the daemon.
 */
export function leanStart(baseUrl: string, cmd: string, args: string[], binary: boolean, onStart?: () => void): Promise<LeanOutcome> {
  const cpu0 = process.cpuUsage();
  const req = create(StartRequestSchema, { process: { cmd, args, envs: {} } });
  const body = binary ? toBinary(StartRequestSchema, req) : Buffer.from(JSON.stringify({ process: { cmd, args } }));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(body.byteLength, 1);
  const out: LeanOutcome = { bytes: 0, frames: 0, exitCode: NaN, clientCpu: 0 };
  return new Promise((resolve, reject) => {
    const r = http.request(
      `${baseUrl}/process.Process/Start`,
      { method: "POST", headers: { "content-type": `application/connect+${binary ? "proto" : "json"}`, authorization: "Basic dXNlcjo=" } },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`Start answered HTTP ${res.statusCode}`));
        let pending: Buffer[] = [];
        let have = 0;
        let ended = false;
        const frame = (flags: number, data: Buffer): void => {
          out.frames++;
          if (flags & 2) {
            const end = JSON.parse(data.toString("utf8")) as { error?: { code: string; message?: string } };
            if (end.error) throw new Error(`stream ended with ${end.error.code}: ${end.error.message ?? ""}`);
            ended = true;
            return;
          }
          if (binary) {
            const ev = fromBinary(StartResponseSchema, data).event?.event;
            if (ev?.case === "data") out.bytes += ev.value.output.value?.byteLength ?? 0;
            else if (ev?.case === "end") out.exitCode = ev.value.exitCode;
            else if (ev?.case === "start") onStart?.();
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
          else if (ev.start) onStart?.();
        };
        // Payload bytes of a binary data frame still to come: counted and dropped as they arrive.
        let skip = 0;
        // The first n bytes (fewer if fewer are here), joining only the chunks they span.
        const peek = (n: number): Buffer => {
          if (pending[0].length >= n || pending.length === 1) return pending[0].subarray(0, n);
          const parts: Buffer[] = [];
          for (let got = 0, i = 0; got < n && i < pending.length; got += pending[i++].length) parts.push(pending[i]);
          return Buffer.concat(parts).subarray(0, n);
        };
        const drop = (n: number): void => {
          have -= n;
          while (n > 0) {
            if (pending[0].length <= n) n -= pending.shift()!.length;
            else {
              pending[0] = pending[0].subarray(n);
              n = 0;
            }
          }
        };
        res.on("data", (chunk: Buffer) => {
          if (skip > 0) {
            const n = Math.min(skip, chunk.length);
            skip -= n;
            if (n === chunk.length) return;
            chunk = chunk.subarray(n);
          }
          pending.push(chunk);
          have += chunk.length;
          try {
            while (have >= 5) {
              const first = peek(5 + DATA_PREFIX_MAX);
              const len = first.readUInt32BE(1);
              if (binary && first[0] === 0) {
                const d = dataPrefix(first.subarray(5), len);
                if (d === "more") break;
                if (d) {
                  // A data event: its protobuf framing checked, its payload counted, not copied.
                  out.frames++;
                  out.bytes += d.payload;
                  drop(5 + d.prefix);
                  const here = Math.min(have, d.payload);
                  drop(here);
                  skip = d.payload - here;
                  continue;
                }
              }
              if (have < 5 + len) break;
              const all = pending.length === 1 ? pending[0] : Buffer.concat(pending);
              frame(all[0], all.subarray(5, 5 + len));
              const rest = all.subarray(5 + len);
              pending = rest.length ? [rest] : [];
              have = rest.length;
            }
          } catch (err) {
            res.destroy();
            reject(err);
          }
        });
        res.on("end", () => {
          const cpu = process.cpuUsage(cpu0);
          out.clientCpu = (cpu.user + cpu.system) / 1e6;
          if (!ended) reject(new Error("the stream ended without an end-of-stream frame"));
          else resolve(out);
        });
        res.on("error", reject);
      },
    );
    r.on("error", reject);
    r.end(Buffer.concat([head, body]));
  });
}

import http from "node:http";
import { fromBinary, toBinary, create } from "@bufbuild/protobuf";
import { StartRequestSchema, StartResponseSchema } from "../../src/gen/process/process_pb.js";
import { addonExtra } from "../../src/system/addon.js";

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
 * every one (binary: protobuf-es fromBinary, which references the payload; JSON: JSON.parse
 * and Buffer's base64; stdout messages in the daemon's exact compact shape skip JSON.parse and
 * are decoded by our addon's strict base64 decoder), checking shapes and counting stdout bytes. It measures what the
 * daemon can stream when the client is not the bottleneck: connect-node's own reader costs
 * several CPU seconds per GiB (envelope reassembly copies; for JSON, protobuf-es's fromJson
 * scans every string for duplicate keys), on the same two cores as the daemon.
 */
export function leanStart(baseUrl: string, cmd: string, args: string[], binary: boolean): Promise<LeanOutcome> {
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
        };
        res.on("data", (chunk: Buffer) => {
          pending.push(chunk);
          have += chunk.length;
          try {
            while (have >= 5) {
              const first = pending[0].length >= 5 ? pending[0] : Buffer.concat(pending);
              const len = first.readUInt32BE(1);
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

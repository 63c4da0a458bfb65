import http from "node:http";
import { create, toBinary } from "@bufbuild/protobuf";
import { StartRequestSchema } from "../../src/envd/gen/process/process_pb.js";
import { StartFrames, type LeanOutcome } from "./start-frames.js";
import { socketRequest } from "./socket-http.js";

export type { LeanOutcome } from "./start-frames.js";

const START_PATH = "/process.Process/Start";
/** Basic `user:` (no password), as the SDKs send it. */
const AUTHORIZATION = "Basic dXNlcjo=";

/** The Start request's one enveloped message and its content type. */
export function startRequest(cmd: string, args: string[], binary: boolean): { type: string; body: Buffer } {
  const msg = binary ? toBinary(StartRequestSchema, create(StartRequestSchema, { process: { cmd, args, envs: {} } })) : Buffer.from(JSON.stringify({ process: { cmd, args } }));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(msg.byteLength, 1);
  return { type: `application/connect+${binary ? "proto" : "json"}`, body: Buffer.concat([head, msg]) };
}

function cpuSince(cpu0: NodeJS.CpuUsage): number {
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / 1e6;
}

/**
 * A lean Connect client for Process.Start over HTTP/1.1 (Node's http, keep-alive agent): it
 * builds the request itself and decodes every answer frame with `StartFrames`. It measures what
 * the daemon adds when the client is not the bottleneck: connect-node's own reader costs several
 * CPU seconds per GiB (envelope reassembly copies; for JSON, protobuf-es's fromJson scans every
 * string for duplicate keys), on the same two cores as the daemon.
 */
export function leanStart(baseUrl: string, cmd: string, args: string[], binary: boolean, onStart?: () => void): Promise<LeanOutcome> {
  const cpu0 = process.cpuUsage();
  const { type, body } = startRequest(cmd, args, binary);
  const frames = new StartFrames(binary, onStart);
  return new Promise((resolve, reject) => {
    const r = http.request(`${baseUrl}${START_PATH}`, { method: "POST", headers: { "content-type": type, authorization: AUTHORIZATION } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`Start answered HTTP ${res.statusCode}`));
      res.on("data", (chunk: Buffer) => {
        try {
          frames.push(chunk);
        } catch (err) {
          res.destroy();
          reject(err);
        }
      });
      res.on("end", () => {
        try {
          const out = frames.finish();
          out.clientCpu = cpuSince(cpu0);
          resolve(out);
        } catch (err) {
          reject(err);
        }
      });
      res.on("error", reject);
    });
    r.on("error", reject);
    r.end(body);
  });
}

/**
 * The same Start over `socketRequest` (a socket of its own, a minimal HTTP/1.1 reader, one reused
 * read buffer): for long streams, where Node's http client costs the client more CPU per GiB than
 * the daemon spends on it.
 */
export async function leanStartSocket(baseUrl: string, cmd: string, args: string[], binary: boolean): Promise<LeanOutcome> {
  const cpu0 = process.cpuUsage();
  const { type, body } = startRequest(cmd, args, binary);
  const frames = new StartFrames(binary);
  const status = await socketRequest(baseUrl, START_PATH, { method: "POST", headers: { "Content-Type": type, Authorization: AUTHORIZATION }, body }, (chunk, code) => {
    if (code === 200) frames.push(chunk);
  });
  if (status !== 200) throw new Error(`Start answered HTTP ${status}`);
  const out = frames.finish();
  out.clientCpu = cpuSince(cpu0);
  return out;
}

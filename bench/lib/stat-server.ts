// The Stat-latency floor of scenario 7: a bare Node server that answers Filesystem.Stat (lstat
// of the path, the entry encoded with the same generated schemas: binary over h2c, JSON over
// HTTP/1.1) and does nothing else. No RPC framework, no auth, no logging, no envd. Run as its
// own process at the daemon's unit priority beside envd carrying the load, it measures what
// this machine gives any Node server answering a Stat there, whatever the server's own work.
// It prints "<h2c port> <http1 port>" on stdout once listening.
import { lstatSync } from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import { basename } from "node:path";
import { fileURLToPath } from "node:url";
import { create, fromBinary, fromJson, toBinary, toJson, type JsonValue } from "@bufbuild/protobuf";
import { FileType, StatRequestSchema, StatResponseSchema } from "../../src/envd/gen/filesystem/filesystem_pb.js";
import { UNIT_NICE } from "../../test/envd/helpers/daemon.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";

type Answer = { status: number; type: string; body: Buffer | string };

function stat(path: string, binary: boolean): Answer {
  let st;
  try {
    st = lstatSync(path);
  } catch (err) {
    return { status: 404, type: "application/json", body: JSON.stringify({ code: "not_found", message: (err as Error).message }) };
  }
  const entry = { name: basename(path), path, type: st.isDirectory() ? FileType.DIRECTORY : FileType.FILE, size: BigInt(st.size), mode: st.mode & 0o777 };
  const res = create(StatResponseSchema, { entry });
  return binary
    ? { status: 200, type: "application/proto", body: Buffer.from(toBinary(StatResponseSchema, res)) }
    : { status: 200, type: "application/json", body: JSON.stringify(toJson(StatResponseSchema, res)) };
}

function answer(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const binary = req.headers["content-type"] === "application/proto";
    const body = Buffer.concat(chunks);
    let a: Answer;
    try {
      const r = binary ? fromBinary(StatRequestSchema, body) : fromJson(StatRequestSchema, JSON.parse(body.toString()) as JsonValue);
      a = stat(r.path, binary);
    } catch (err) {
      a = { status: 400, type: "application/json", body: JSON.stringify({ code: "invalid_argument", message: (err as Error).message }) };
    }
    res.writeHead(a.status, { "content-type": a.type });
    res.end(a.body);
  });
}

function serve(): void {
  const h2 = http2.createServer(answer);
  const h1 = http.createServer(answer);
  let ready = 0;
  const listening = (): void => {
    if (++ready < 2) return;
    const port = (s: http.Server | http2.Http2Server): number => (s.address() as { port: number }).port;
    process.stdout.write(`${port(h2)} ${port(h1)}\n`);
  };
  h2.listen(0, "127.0.0.1", listening);
  h1.listen(0, "127.0.0.1", listening);
  process.on("SIGTERM", () => process.exit(0));
}

/** A running Stat floor server: `url` serves h2c, `http1Url` HTTP/1.1. */
export interface StatServer extends ServerProcess {
  http1Url: string;
}

/** Starts this file as its own Node process (the daemon's Node) at the unit's nice value. */
export async function startStatServer(): Promise<StatServer> {
  const server = await startServerProcess(fileURLToPath(import.meta.url), [], { nice: UNIT_NICE });
  const [h2Port, h1Port] = server.firstLine.split(" ").map(Number);
  if (!h2Port || !h1Port) throw new Error(`the Stat server reported "${server.firstLine}"`);
  return { ...server, url: `http://127.0.0.1:${h2Port}`, http1Url: `http://127.0.0.1:${h1Port}` };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) serve();

// The client floor of a command round trip: a bare Node server (its own process, like the
// daemon) that answers every Process.Start, once its request body is in, with a start event, an
// end event (exit 0) and the end-of-stream frame, encoded once at load by protobuf-es. No
// process, no RPC framework: what remains of a round trip is the client's own work and the
// loopback HTTP exchange. h2c on one port, HTTP/1.1 on another (Node serves both on one port
// only with TLS). Run directly, this file is the server and prints both ports.
import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { create, toBinary, toJsonString } from "@bufbuild/protobuf";
import { StartResponseSchema } from "../../src/envd/gen/process/process_pb.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";

const START_PATH = "/process.Process/Start";

/** One Connect envelope: flags, big-endian length, payload. */
function envelope(flags: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

/** The whole answer body for each codec: start, end, end-of-stream. */
function cannedBodies(): { proto: Buffer; json: Buffer } {
  const start = create(StartResponseSchema, { event: { event: { case: "start", value: { pid: 4242 } } } });
  const end = create(StartResponseSchema, { event: { event: { case: "end", value: { exitCode: 0, exited: true, status: "exit status 0" } } } });
  const eos = envelope(2, Buffer.from("{}"));
  return {
    proto: Buffer.concat([envelope(0, Buffer.from(toBinary(StartResponseSchema, start))), envelope(0, Buffer.from(toBinary(StartResponseSchema, end))), eos]),
    json: Buffer.concat([
      envelope(0, Buffer.from(toJsonString(StartResponseSchema, start))),
      envelope(0, Buffer.from(toJsonString(StartResponseSchema, end))),
      eos,
    ]),
  };
}

type Answer = (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) => void;

function answerer(): Answer {
  const bodies = cannedBodies();
  return (req, res) => {
    const type = String(req.headers["content-type"] ?? "");
    const json = type === "application/connect+json";
    if (req.method !== "POST" || req.url !== START_PATH || (!json && type !== "application/connect+proto")) {
      res.writeHead(404).end();
      return;
    }
    req.resume();
    req.once("end", () => {
      const body = json ? bodies.json : bodies.proto;
      res.writeHead(200, { "content-type": type, "content-length": body.length }).end(body);
    });
  };
}

async function serve(): Promise<void> {
  const answer = answerer();
  const h2 = http2.createServer(answer);
  const h1 = http.createServer(answer);
  const listen = (s: http.Server | http2.Http2Server) =>
    new Promise<number>((resolve) => s.listen(0, "127.0.0.1", () => resolve((s.address() as AddressInfo).port)));
  process.stdout.write(`${await listen(h2)} ${await listen(h1)}\n`);
  process.on("SIGTERM", () => process.exit(0));
}

/** The canned server as a separate Node process: `url` speaks h2c, `http1Url` HTTP/1.1. */
export async function startCannedStart(): Promise<ServerProcess & { http1Url: string }> {
  const server = await startServerProcess(fileURLToPath(import.meta.url));
  return { ...server, http1Url: `http://127.0.0.1:${server.firstLine.split(" ")[1]}` };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) void serve();

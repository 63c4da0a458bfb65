import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createH2cServer, type Http2Server } from "node:http2";
import { createHash } from "node:crypto";
import { createServer as createNetServer } from "node:net";

/** What the HTTP/1.1 target saw of one request. */
export interface Seen {
  method: string;
  url: string;
  httpVersion: string;
  /** The client port of the connection it came on (the same port: a reused connection). */
  remotePort?: number;
  headers: Record<string, string | string[] | undefined>;
}

/** Starts a server on 127.0.0.1:0; resolves with its port. */
export function listen(server: Server | Http2Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)));
}

/** A port on 127.0.0.1 where nothing listens (bound, then released). */
export async function closedPort(): Promise<number> {
  const s = createNetServer();
  const port = await listen(s as unknown as Server);
  await new Promise((r) => s.close(r));
  return port;
}

/**
 * The HTTP/1.1 test target: GET /seen answers what it saw as JSON; POST /sha256 answers the
 * hash and size of the body; everything it saw is kept in `seen`.
 */
export async function startHttp1Target(extra?: (req: IncomingMessage, res: ServerResponse) => boolean): Promise<{ port: number; server: Server; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    seen.push({ method: req.method ?? "", url: req.url ?? "", httpVersion: req.httpVersion, remotePort: req.socket.remotePort, headers: { ...req.headers } });
    if (extra?.(req, res)) return;
    if (req.url === "/sha256") {
      const h = createHash("sha256");
      let n = 0;
      req.on("data", (c: Buffer) => {
        h.update(c);
        n += c.length;
      });
      req.on("end", () => res.end(JSON.stringify({ sha256: h.digest("hex"), bytes: n })));
      return;
    }
    res.setHeader("content-type", "application/json");
    res.setHeader("connection", "keep-alive");
    res.setHeader("keep-alive", "timeout=5");
    res.end(JSON.stringify(seen[seen.length - 1]));
  });
  const port = await listen(server);
  return { port, server, seen };
}

/** The h2c test target, standing in for envd: answers what it saw, with trailers like gRPC. */
export async function startH2cTarget(): Promise<{ port: number; server: Http2Server; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createH2cServer();
  server.on("stream", (stream, headers) => {
    seen.push({ method: String(headers[":method"]), url: String(headers[":path"]), httpVersion: "2.0", remotePort: stream.session?.socket?.remotePort, headers: { ...headers } as Seen["headers"] });
    stream.on("error", () => undefined);
    const path = String(headers[":path"]);
    if (path === "/echo") {
      // Full duplex: every chunk goes straight back; the end carries a gRPC-style status trailer.
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0", "grpc-message": "done" }));
      stream.pipe(stream);
      return;
    }
    if (path === "/reset-after-headers") {
      stream.respond({ ":status": 200 });
      stream.write("partial");
      setTimeout(() => stream.destroy(new Error("the target gives up")), 50);
      return;
    }
    stream.respond({ ":status": 200, "content-type": "application/json" });
    stream.end(JSON.stringify(seen[seen.length - 1]));
  });
  const port = await listen(server);
  return { port, server, seen };
}

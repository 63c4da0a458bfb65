import { createSecureServer, type Http2Session } from "node:http2";
import type { Socket } from "node:net";
import type { Logger } from "../log.js";
import type { Dispatcher } from "./dispatch.js";

/** The one TLS listener: HTTP/2 and HTTP/1.1 (ALPN), every request to the dispatcher. */
export interface Listener {
  /** Binds; resolves with the port actually bound (a 0 port picks a free one). */
  listen(host: string, port: number): Promise<number>;
  /** Stops accepting, lets requests in flight finish for up to `graceMs`, then cuts what is left. */
  close(graceMs: number): Promise<void>;
}

/** Headers must arrive within this (slow-loris bound); bodies and streams have no overall limit. */
const HEADERS_TIMEOUT_MS = 30_000;
/** A connection idle this long is closed (E2B's proxy keeps ~10 minutes): HTTP/1.1 with no traffic, HTTP/2 with no new stream. */
const IDLE_TIMEOUT_MS = 620_000;

/** Creates the listener over a certificate chain and its key. */
export function createListener(opts: { key: Buffer; cert: Buffer; dispatcher: Dispatcher; log: Logger }): Listener {
  const { dispatcher, log } = opts;
  const server = createSecureServer({
    key: opts.key,
    cert: opts.cert,
    allowHTTP1: true,
    minVersion: "TLSv1.2",
    settings: { maxConcurrentStreams: 1000, enablePush: false },
    // HTTP/1.1 side: a header deadline, but no whole-request deadline (uploads and streams run long).
    headersTimeout: HEADERS_TIMEOUT_MS,
    requestTimeout: 0,
    keepAliveTimeout: 65_000,
  } as Parameters<typeof createSecureServer>[0]);
  const sessions = new Set<Http2Session>();
  const sockets = new Set<Socket>();

  server.on("request", (req, res) => dispatcher.request(req, res));
  server.on("upgrade", (req, socket: Socket, head: Buffer) => dispatcher.upgrade(req, socket, head));
  server.on("session", (session: Http2Session) => {
    sessions.add(session);
    // A session that opens no stream this long gets GOAWAY (streams in flight finish). Its own
    // timer is not used: Node leaves it armed when the session closes, holding the session (and
    // its socket) for the whole period after every closed connection.
    const idle = setTimeout(() => session.close(), IDLE_TIMEOUT_MS);
    idle.unref();
    session.on("stream", () => idle.refresh());
    session.on("close", () => {
      clearTimeout(idle);
      sessions.delete(session);
    });
    session.on("error", (err) => log.debug({ err: err.message }, "http2 session error"));
  });
  // Answers go out as written: with Nagle on, a response's last small segment waits for the
  // client's delayed ACK (up to 40 ms on Linux) whenever the one before it is unacknowledged.
  server.on("connection", (socket: Socket) => socket.setNoDelay(true));
  server.on("secureConnection", (socket: Socket & { alpnProtocol?: string | false }) => {
    sockets.add(socket);
    if (socket.alpnProtocol !== "h2") socket.setTimeout(IDLE_TIMEOUT_MS, () => socket.destroy());
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
  });
  server.on("tlsClientError", (err: NodeJS.ErrnoException) => log.debug({ code: err.code, err: err.message }, "TLS handshake failed"));
  server.on("sessionError", (err: Error) => log.debug({ err: err.message }, "http2 session error"));
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Socket) => {
    if (err.code === "ECONNRESET" || err.code === "EPIPE") return void socket.destroy();
    log.debug({ code: err.code }, "malformed HTTP/1.1 request");
    if (socket.writable && !socket.destroyed) socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    else socket.destroy();
  });
  server.on("error", (err: Error) => log.error({ err: err.message }, "listener error"));

  return {
    listen(host, port) {
      return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen({ host, port, ipv6Only: false }, () => {
          server.off("error", reject);
          resolve((server.address() as { port: number }).port);
        });
      });
    },

    close(graceMs) {
      return new Promise((resolve) => {
        server.close(() => resolve());
        for (const s of sessions) s.close();
        // server.close() also ends HTTP/1.1 connections idle between requests (Node ≥ 19); busy
        // ones close after their answer, or at the grace.
        const hard = setTimeout(() => {
          for (const s of sessions) s.destroy();
          for (const s of sockets) s.destroy();
        }, graceMs);
        hard.unref();
      });
    },
  };
}

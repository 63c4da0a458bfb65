import http from "node:http";
import type http2 from "node:http2";
import { lazy } from "../platform/lazy.js";

/** node:http2 loads with the first HTTP/2 connection: most clients (and /health) speak HTTP/1.1. */
const loadHttp2 = lazy<typeof http2>("node:http2", () => require("node:http2"));
import type net from "node:net";
import type { Duplex } from "node:stream";
import { createFront } from "./front.js";
import type { Logger } from "./log.js";

/** Idle keep-alive timeout (reference: 640 s, longer than the upstream proxy's). */
export const IDLE_TIMEOUT_MS = 640_000;

type Handler = (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) => void;

/** One port serving HTTP/1.1 and cleartext HTTP/2 (prior knowledge), with tracked connections. */
export class Server {
  private readonly h1: http.Server;
  private h2Server?: http2.Http2Server;
  private readonly front: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private readonly sessions = new Set<http2.ServerHttp2Session>();

  constructor(
    private readonly handler: Handler,
    private readonly log?: Logger,
  ) {
    this.h1 = http.createServer({ keepAliveTimeout: IDLE_TIMEOUT_MS, requestTimeout: 0, headersTimeout: 60_000 }, handler);
    this.h1.timeout = 0;
    this.h1.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
      if (socket.writable && err.code !== "ECONNRESET") {
        socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      } else socket.destroy();
    });
    this.front = createFront(
      (socket) => {
        this.sockets.add(socket);
        socket.on("close", () => this.sockets.delete(socket));
        this.h1.emit("connection", socket);
      },
      (socket) => this.h2.emit("connection", socket),
    );
  }

  /** The HTTP/2 server, made when the first HTTP/2 connection arrives. */
  private get h2(): http2.Http2Server {
    if (this.h2Server) return this.h2Server;
    const h2 = loadHttp2().createServer({ settings: { maxConcurrentStreams: 1000 }, maxSessionMemory: 64 }, this.handler);
    h2.on("session", (session: http2.ServerHttp2Session) => {
      this.sessions.add(session);
      session.setTimeout(IDLE_TIMEOUT_MS, () => session.close());
      session.on("close", () => this.sessions.delete(session));
      session.on("error", () => session.destroy());
    });
    this.h2Server = h2;
    return h2;
  }

  /** Starts listening; resolves with the bound port. */
  listen(port: number, host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.front.once("error", reject);
      // ipv6Only false: "::" also accepts IPv4, so localhost works as 127.0.0.1 or ::1. "::" is
      // also what Node binds without a host (0.0.0.0 where IPv6 is off), and that skips a DNS
      // lookup of the literal, whose IPv6 check compiles a large regular expression at start.
      this.front.listen({ port, host: host === "::" ? undefined : host, ipv6Only: false }, () => {
        this.front.off("error", reject);
        this.front.on("error", (err: NodeJS.ErrnoException) => this.acceptFailed(err));
        // The HTTP/1.1 server never listens itself; 'listening' starts its connection tracking,
        // which enforces headersTimeout and lets closeIdleConnections() find idle keep-alives.
        this.h1.emit("listening");
        const addr = this.front.address();
        resolve(typeof addr === "object" && addr ? addr.port : port);
      });
    });
  }

  /**
   * Graceful close: stop accepting, let in-flight requests finish (streams are ended by the
   * caller's shutdown signal), then destroy whatever remains after `graceMs`.
   */
  async close(graceMs: number): Promise<void> {
    this.front.close();
    this.h1.closeIdleConnections();
    for (const s of this.sessions) s.close();
    const deadline = Date.now() + graceMs;
    while (Date.now() < deadline && (this.sessions.size > 0 || this.activeH1() > 0)) {
      await new Promise((r) => setTimeout(r, 20));
      this.h1.closeIdleConnections();
    }
    for (const s of this.sessions) s.destroy();
    for (const s of this.sockets) s.destroy();
  }

  private acceptErrors = 0;
  private acceptLogged = 0;

  /**
   * An accept that failed (EMFILE, ENFILE when every descriptor is taken; ENOMEM, ...) costs the
   * connection it was for, never the daemon: libuv closes the connections waiting in the
   * backlog while descriptors are exhausted (its reserve-descriptor trick) and keeps listening,
   * so they are served again as soon as descriptors are free. Logged at most once a second,
   * with how many failed meanwhile.
   */
  private acceptFailed(err: NodeJS.ErrnoException): void {
    this.acceptErrors++;
    const now = Date.now();
    if (now - this.acceptLogged < 1000) return;
    this.acceptLogged = now;
    this.log?.error({ code: err.code, failed: this.acceptErrors }, "cannot accept connections");
    this.acceptErrors = 0;
  }

  private activeH1(): number {
    return this.sockets.size;
  }
}

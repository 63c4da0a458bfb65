import { Agent, createServer, request, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Logger } from "../log.js";
import { matchDomain, type EgressPolicy } from "./policy.js";

/** Headers that belong to one hop, never passed on (RFC 9110 §7.6.1). */
const HOP = new Set(["connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate", "te", "trailer", "transfer-encoding", "upgrade"]);

/** The most bytes of a request head (what the TLS side allows for a ClientHello). */
const MAX_HEAD = 16 * 1024;
/** How long a sandbox's connection may sit without a byte either way. */
const IDLE_MS = 120_000;

/** The name of a Host header value: without a port or brackets, lower-cased, no final dot. */
export function hostHeaderName(value: string | undefined): string | undefined {
  const h = value?.trim();
  if (!h) return undefined;
  const name = h.startsWith("[") ? h.slice(1, h.indexOf("]")) : h.replace(/:\d*$/, "");
  return name.toLowerCase().replace(/\.$/, "") || undefined;
}

/** A header list without the hop-by-hop ones (and those the Connection header names). */
function endToEnd(raw: string[]): OutgoingHttpHeaders {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) if (raw[i].toLowerCase() === "connection") for (const t of raw[i + 1].split(",")) named.add(t.trim().toLowerCase());
  const out: OutgoingHttpHeaders = {};
  for (let i = 0; i < raw.length; i += 2) {
    const k = raw[i];
    const lk = k.toLowerCase();
    if (HOP.has(lk) || named.has(lk)) continue;
    const prev = out[k];
    out[k] = prev === undefined ? raw[i + 1] : ([] as string[]).concat(prev as string | string[], raw[i + 1]);
  }
  return out;
}

/** One sandbox connection's state: its policy, and the name (and address) its first request was for. */
interface Conn {
  src: string;
  policy: EgressPolicy;
  name?: string;
  ip?: string;
  agent: Agent;
  /** Settles when the connection's latest request is decided (requests are decided in order). */
  decided: Promise<unknown>;
  /** Settles when the connection's latest response is done (a refusal closes the connection only after the answers before it). */
  answered: Promise<void>;
}

/** What the HTTP side of the egress proxy needs. */
export interface HttpEgressOptions {
  /** The address an allowed name is dialled at (undefined: the name resolves to nothing allowed). */
  resolveName(name: string): Promise<string | undefined>;
  log: Logger;
}

/**
 * The egress proxy's HTTP side: Node's HTTP parser reads every request a sandbox sends on a
 * connection (keep-alive and pipelined ones too), and each must name, in an origin-form target
 * and a single Host header, the one allowed name the connection was opened for; it is then sent
 * on, re-framed, to that name's address. A request for another name, an absolute-form target, a
 * CONNECT or a malformed request closes that connection, so no second request reaches a server
 * (a shared front end, say) the policy does not name. Hostile answers get a 502.
 */
export function createHttpEgress(o: HttpEgressOptions): { server: Server; take(client: Socket, src: string, policy: EgressPolicy): void; close(): void } {
  const conns = new WeakMap<Socket, Conn>();
  const server = createServer({ maxHeaderSize: MAX_HEAD, keepAliveTimeout: 30_000 });
  // the server never listens (connections are handed to it), so its header and request timers
  // never run: a connection idle this long is closed instead
  server.setTimeout(IDLE_MS, (socket: Socket) => socket.destroy());

  const refuse = (res: ServerResponse, status: number, why: string) => {
    res.writeHead(status, { "content-type": "text/plain", connection: "close" });
    res.end(`${why}\n`);
    res.once("finish", () => res.socket?.destroy());
  };

  /** The connection's upstream address for this request, or why it is refused. */
  const decide = async (req: IncomingMessage, c: Conn): Promise<string | { status: number; why: string }> => {
    if (!req.url?.startsWith("/")) return { status: 400, why: "egress proxy: only origin-form request targets" };
    const hosts = req.rawHeaders.filter((_, i) => i % 2 === 0 && req.rawHeaders[i].toLowerCase() === "host");
    const name = hostHeaderName(req.headers.host);
    if (hosts.length !== 1 || !name) return { status: 400, why: "egress proxy: a request needs exactly one Host header" };
    if (c.name !== undefined) return name === c.name && c.ip ? c.ip : { status: 403, why: `egress proxy: this connection is for ${c.name}` };
    if (!c.policy.domains.some((d) => matchDomain(d, name))) return { status: 403, why: "egress proxy: no allowed domain matches" };
    const ip = await o.resolveName(name);
    if (!ip) return { status: 403, why: "egress proxy: the name does not resolve to an allowed address" };
    c.name = name;
    c.ip = ip;
    return ip;
  };

  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const c = conns.get(req.socket);
    if (!c) return void req.socket.destroy();
    const before = c.answered;
    c.answered = new Promise<void>((r) => res.once("close", r));
    const decision = c.decided.then(() => decide(req, c));
    c.decided = decision.catch(() => undefined);
    void decision.then((to) => {
      if (typeof to !== "string") {
        // as for a TLS connection whose SNI no rule allows: the connection is closed, nothing is
        // answered (once the answers to the requests before this one are out)
        o.log.debug({ src: c.src, host: req.headers.host, why: to.why }, "egress proxy: request refused; connection closed");
        return void before.then(() => req.socket.destroy());
      }
      const up = request({ host: to, port: 80, method: req.method, path: req.url, headers: endToEnd(req.rawHeaders), agent: c.agent, setHost: false });
      up.on("response", (r) => {
        try {
          res.writeHead(r.statusCode ?? 502, r.statusMessage, endToEnd(r.rawHeaders));
        } catch {
          r.destroy();
          return refuse(res, 502, "egress proxy: the server's answer is not valid HTTP");
        }
        r.on("error", () => res.destroy());
        r.pipe(res);
      });
      up.on("error", () => (res.headersSent ? res.destroy() : refuse(res, 502, "egress proxy: the server cannot be reached")));
      req.on("error", () => up.destroy());
      res.on("close", () => {
        if (!res.writableFinished) up.destroy();
      });
      req.pipe(up);
    }, () => refuse(res, 502, "egress proxy: error"));
  });
  // A protocol switch (WebSocket) to the connection's name: once the server answers 101 it no
  // longer reads HTTP on that connection, and the bytes go through as they are.
  server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const c = conns.get(socket);
    if (!c) return void socket.destroy();
    const fail = (status: string) => socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
    const decision = c.decided.then(() => decide(req, c));
    c.decided = decision.catch(() => undefined);
    void decision.then((to) => {
      if (typeof to !== "string") return void c.answered.then(() => socket.destroy());
      const headers = { ...endToEnd(req.rawHeaders), connection: "upgrade", upgrade: req.headers.upgrade ?? "" };
      const up = request({ host: to, port: 80, method: req.method, path: req.url, headers, setHost: false, agent: false });
      up.on("upgrade", (r, upSock: Socket, upHead: Buffer) => {
        const lines = [`HTTP/1.1 101 ${r.statusMessage ?? ""}`.trim()];
        for (let i = 0; i < r.rawHeaders.length; i += 2) lines.push(`${r.rawHeaders[i]}: ${r.rawHeaders[i + 1]}`);
        // a switched connection may idle as long as both ends like
        socket.setTimeout(0);
        socket.write(lines.join("\r\n") + "\r\n\r\n");
        if (upHead.length > 0) socket.write(upHead);
        if (head.length > 0) upSock.write(head);
        upSock.on("error", () => socket.destroy());
        socket.on("error", () => upSock.destroy());
        upSock.once("close", () => socket.destroy());
        socket.once("close", () => upSock.destroy());
        upSock.pipe(socket);
        socket.pipe(upSock);
      });
      up.on("response", (r) => {
        r.resume();
        fail("502 Bad Gateway");
      });
      up.on("error", () => fail("502 Bad Gateway"));
      up.end();
    }, () => fail("502 Bad Gateway"));
  });
  // a tunnel carries bytes the proxy cannot read: refused
  server.on("connect", (_req: IncomingMessage, socket: Socket) => socket.end("HTTP/1.1 403 Forbidden\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"));
  server.on("clientError", (_err, socket: Socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
    else socket.destroy();
  });

  return {
    server,
    take(client, src, policy) {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      conns.set(client, { src, policy, agent, decided: Promise.resolve(), answered: Promise.resolve() });
      client.once("close", () => agent.destroy());
      server.emit("connection", client);
    },
    close() {
      server.close();
      server.closeAllConnections();
    },
  };
}

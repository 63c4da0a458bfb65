import { readdirSync, readFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { connect as h2connect, type ClientHttp2Session, type IncomingHttpHeaders } from "node:http2";
import { connect as tlsConnect } from "node:tls";
import type { Sandboxd } from "./sandboxd.js";

/** What a client got: an answer read whole, or the error that ended it. */
export type Outcome = { status: number; headers: IncomingHttpHeaders; body: string; trailers?: IncomingHttpHeaders } | { error: string };

/** The pid of a test's sandboxd (the `serve` process on its data dir), read from /proc. */
export function sandboxdPid(s: Sandboxd): number {
  for (const p of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(p)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    const i = argv.indexOf("--data-dir");
    if (argv.includes("serve") && i >= 0 && argv[i + 1] === s.dataDir) return Number(p);
  }
  throw new Error(`no sandboxd process on ${s.dataDir}`);
}

/** A field of /proc/<pid>/status in KiB (VmRSS now, VmHWM the peak so far). */
export function memKiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`^${field}:\\s+([0-9]+) kB$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no ${field} for ${pid}`);
  return Number(m[1]);
}

/** `<port>-<id>.<domain>` (with sandboxd's port), the host a sandbox port is reached at. */
export function sandboxHost(s: Sandboxd, port: number, id: string): string {
  return `${port}-${id}.${s.domain}`;
}

/**
 * One HTTP/1.1 GET over TLS to sandboxd; `stopAfter` bytes of body, the client leaves (for an
 * answer that never ends). Never rejects: a failed exchange is `{ error }`.
 */
export function h1(s: Sandboxd, ca: Buffer, host: string, path: string, opts: { stopAfter?: number; headers?: Record<string, string> } = {}): Promise<Outcome> {
  return new Promise((resolve) => {
    const req = httpsRequest({ host: "127.0.0.1", port: s.port, path, ca, servername: host.split(":")[0], agent: false, headers: { host, ...opts.headers } }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => {
        body += c.toString("latin1");
        if (opts.stopAfter !== undefined && body.length >= opts.stopAfter) {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        }
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on("error", (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    });
    req.on("error", (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    req.end();
  });
}

/** An HTTP/2 session to sandboxd (the caller closes it). */
export function h2session(s: Sandboxd, ca: Buffer): ClientHttp2Session {
  const session = h2connect(`https://127.0.0.1:${s.port}`, { ca, servername: `x.${s.domain.split(":")[0]}` });
  session.on("error", () => undefined);
  return session;
}

/** One HTTP/2 GET on `session`; like `h1`, never rejects. */
export function h2(session: ClientHttp2Session, host: string, path: string, opts: { stopAfter?: number } = {}): Promise<Outcome> {
  return new Promise((resolve) => {
    const stream = session.request({ ":method": "GET", ":path": path, ":authority": host });
    let headers: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders | undefined;
    let body = "";
    stream.on("response", (h) => (headers = h));
    stream.on("trailers", (t) => (trailers = t));
    stream.on("data", (c: Buffer) => {
      body += c.toString("latin1");
      if (opts.stopAfter !== undefined && body.length >= opts.stopAfter) {
        stream.close();
        resolve({ status: Number(headers[":status"]), headers, body });
      }
    });
    stream.on("end", () => resolve({ status: Number(headers[":status"]), headers, body, ...(trailers ? { trailers } : {}) }));
    stream.on("error", (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    stream.on("close", () => {
      if (stream.rstCode) resolve({ error: `reset ${stream.rstCode}` });
    });
    stream.end();
  });
}

/**
 * A WebSocket handshake over TLS to sandboxd: resolves with the head of the answer (or what came
 * before the close) and, when `echo` is given and the answer is a 101, what came back for it.
 */
export function wsHandshake(s: Sandboxd, ca: Buffer, host: string, path: string, echo?: string): Promise<{ head: string; echoed?: string }> {
  return new Promise((resolve) => {
    const sock = tlsConnect({ host: "127.0.0.1", port: s.port, ca, servername: host.split(":")[0], ALPNProtocols: ["http/1.1"] }, () => {
      sock.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    });
    let data = "";
    let head: string | undefined;
    const done = () => resolve({ head: head ?? data, ...(head !== undefined && echo !== undefined ? { echoed: data.slice(head.length) } : {}) });
    sock.on("data", (c: Buffer) => {
      data += c.toString("latin1");
      if (head === undefined && data.includes("\r\n\r\n")) {
        head = data.slice(0, data.indexOf("\r\n\r\n") + 4);
        if (echo !== undefined && head.startsWith("HTTP/1.1 101")) sock.write(echo);
        else sock.destroy();
      }
      if (head !== undefined && echo !== undefined && data.length >= head.length + echo.length) sock.destroy();
    });
    sock.on("close", done);
    sock.on("error", () => undefined);
  });
}

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request as httpsRequest, type RequestOptions } from "node:https";
import { connect as h2connect, type ClientHttp2Session, type OutgoingHttpHeaders } from "node:http2";
import type { IncomingHttpHeaders } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createJsonLogger } from "../../../src/common/log.js";
import { createProxy, type Proxy } from "../../../src/sandboxd/proxy/proxy.js";
import type { ProxyLimits } from "../../../src/sandboxd/proxy/dial.js";
import type { RouteTarget } from "../../../src/sandboxd/proxy/target.js";
import { createDispatcher, type ApiHandler } from "../../../src/sandboxd/server/dispatch.js";
import { createListener } from "../../../src/sandboxd/server/listener.js";
import { ensureTls } from "../../../src/sandboxd/tls/certs.js";

export const DOMAIN = "e2b.localhost";

/** The real listener, dispatcher and proxy in this process, over an index the test fills. */
export interface Front {
  port: number;
  ca: Buffer;
  targets: Map<string, RouteTarget>;
  /** The proxy itself (its pools can be swept by hand). */
  proxy: Proxy;
  /** One HTTP/1.1 request over TLS to 127.0.0.1 with the given Host; the whole answer. */
  h1(host: string, path: string, opts?: { method?: string; headers?: Record<string, string>; body?: Buffer | string }): Promise<Answer>;
  /** A fresh HTTP/2 session to the listener (the caller closes it). */
  h2session(): ClientHttp2Session;
  /** One HTTP/2 request on `session`; the whole answer, trailers included. */
  h2(session: ClientHttp2Session, host: string, path: string, opts?: { method?: string; headers?: OutgoingHttpHeaders; body?: Buffer | string }): Promise<Answer>;
  options(host: string, path: string, extra?: RequestOptions): RequestOptions;
  close(): Promise<void>;
}

/** A response read whole. */
export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  trailers: IncomingHttpHeaders;
  body: Buffer;
}

/** Starts the front on a free port with a fresh CA in a temp dir. */
export async function startFront(opts: { limits?: Partial<ProxyLimits>; api?: ApiHandler; ready?: () => boolean; exists?: (id: string) => boolean } = {}): Promise<Front> {
  const dir = mkdtempSync(join(tmpdir(), "sandboxd-front-"));
  const log = createJsonLogger({ level: process.env.SANDBOXD_TEST_LOG ?? "silent", fd: 2, name: "test" });
  const tls = await ensureTls(dir, DOMAIN, log);
  const ca = readFileSync(tls.caFile);
  const targets = new Map<string, RouteTarget>();
  const proxy = createProxy({ index: { lookup: (id) => targets.get(id) }, log, limits: opts.limits, exists: opts.exists });
  const dispatcher = createDispatcher({
    domain: DOMAIN,
    api: () => opts.api,
    proxy,
    readiness: () => (opts.ready?.() ?? true ? { ready: true } : { ready: false, reason: "base template not built" }),
    log,
  });
  const listener = createListener({ key: tls.key, cert: tls.cert, dispatcher, log });
  const port = await listener.listen("127.0.0.1", 0);
  const sessions = new Set<ClientHttp2Session>();

  const options = (host: string, path: string, extra: RequestOptions = {}): RequestOptions => ({
    host: "127.0.0.1",
    port,
    path,
    ca,
    // The certificate is checked against a name it covers; the Host header under test is separate.
    servername: `x.${DOMAIN}`,
    agent: false,
    ...extra,
    headers: { host, ...(extra.headers as Record<string, string>) },
  });

  return {
    port,
    ca,
    targets,
    proxy,
    options,
    h1(host, path, o = {}) {
      return new Promise((resolve, reject) => {
        const req = httpsRequest(options(host, path, { method: o.method ?? "GET", headers: o.headers }), (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, trailers: res.trailers, body: Buffer.concat(chunks) }));
          res.on("error", reject);
        });
        req.on("error", reject);
        req.end(o.body);
      });
    },
    h2session() {
      const s = h2connect(`https://127.0.0.1:${port}`, { ca, servername: DOMAIN.replace(/^/, "x.") });
      s.on("error", () => undefined);
      sessions.add(s);
      return s;
    },
    h2(session, host, path, o = {}) {
      return new Promise((resolve, reject) => {
        const stream = session.request({ ":method": o.method ?? "GET", ":path": path, ":authority": host, ...o.headers });
        let headers: IncomingHttpHeaders = {};
        let trailers: IncomingHttpHeaders = {};
        const chunks: Buffer[] = [];
        stream.on("response", (h) => (headers = h));
        stream.on("trailers", (t) => (trailers = t));
        stream.on("data", (c: Buffer) => chunks.push(c));
        stream.on("end", () => resolve({ status: Number(headers[":status"]), headers, trailers, body: Buffer.concat(chunks) }));
        stream.on("error", reject);
        stream.end(o.body);
      });
    },
    async close() {
      for (const s of sessions) s.destroy();
      proxy.close();
      await listener.close(100);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A running sandbox entry pointing at a test server on 127.0.0.1. */
export function target(sandboxID: string, envdPort: number, extra: Partial<RouteTarget> = {}): RouteTarget {
  return { sandboxID, state: "running", ip: "127.0.0.1", envdPort, ...extra };
}

import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "../log.js";
import type { AnyRequest, AnyResponse } from "./request.js";
import { cutResponse, sendText } from "../proxy/errors.js";
import type { Proxy } from "../proxy/proxy.js";
import { writeRaw } from "../proxy/upgrade.js";
import { classify } from "./host.js";

/** The control API's request handler (it answers every error itself, as `{code, message}` JSON). */
export type ApiHandler = (req: AnyRequest, res: AnyResponse) => void;

/** Whether sandboxes can be made now, and if not, why (shown by /health). */
export type Readiness = () => { ready: true } | { ready: false; reason: string };

/** What the listener calls per request and per HTTP/1.1 upgrade. */
export interface Dispatcher {
  request(req: AnyRequest, res: AnyResponse): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

/** Sends a `{code, message}` JSON answer, the API's error shape. */
export function sendJson(res: AnyResponse, status: number, body: unknown): void {
  if (res.headersSent) return cutResponse(res);
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "cache-control": "no-store" });
  res.end(text);
}

/** The Host of a request in either protocol. */
function authorityOf(req: AnyRequest): string {
  return String(req.headers[":authority"] ?? req.headers.host ?? "");
}

/**
 * Routes by Host: `api.<domain>` to the API (with /health answered here, as it is about this
 * process), sandbox hosts to the proxy, the bare domain to the dashboard (or a 404 without one),
 * foreign hosts to a 404, malformed
 * hosts to E2B's plain-text 400. No exception escapes a request.
 */
export function createDispatcher(opts: { domain: string; api: () => ApiHandler | undefined; proxy: Proxy; readiness: Readiness; log: Logger; dashboard?: ApiHandler }): Dispatcher {
  const { domain, proxy, log } = opts;

  const request = (req: AnyRequest, res: AnyResponse): void => {
    const dest = classify(authorityOf(req), req.headers, domain);
    switch (dest.kind) {
      case "sandbox":
        return proxy.handle(req, res, dest.route);
      case "bad":
        return sendText(res, 400, dest.message);
      case "root":
        if (opts.dashboard) return opts.dashboard(req, res);
        return sendJson(res, 404, { code: 404, message: `Nothing is served at ${domain} yet: the API is at api.${domain}` });
      case "unknown":
        return sendJson(res, 404, { code: 404, message: `Unknown host; this server answers for ${domain} and its subdomains` });
      case "api": {
        const path = (req.url ?? "/").split("?", 1)[0];
        if (path === "/health" && (req.method === "GET" || req.method === "HEAD")) {
          const r = opts.readiness();
          return sendJson(res, r.ready ? 200 : 503, r.ready ? { status: "ok" } : { code: 503, message: `sandboxd is not ready: ${r.reason}` });
        }
        const api = opts.api();
        if (!api) return sendJson(res, 503, { code: 503, message: "sandboxd is starting; try again shortly" });
        return api(req, res);
      }
    }
  };

  return {
    request(req, res) {
      try {
        request(req, res);
      } catch (err) {
        log.error({ err: String((err as Error)?.stack ?? err), method: req.method }, "request handler threw");
        try {
          sendJson(res, 500, { code: 500, message: "internal error while routing the request" });
        } catch {
          cutResponse(res);
        }
      }
    },

    upgrade(req, socket, head) {
      try {
        const dest = classify(authorityOf(req), req.headers, domain);
        if (dest.kind === "sandbox") return proxy.upgrade(req, socket, head, dest.route);
        if (dest.kind === "bad") return writeRaw(socket, 400, { "content-type": "text/plain; charset=utf-8", connection: "close" }, dest.message + "\n");
        const body = JSON.stringify({ code: 404, message: "Upgrades are served for sandbox hosts only" });
        writeRaw(socket, 404, { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), connection: "close" }, body);
      } catch (err) {
        log.error({ err: String((err as Error)?.stack ?? err) }, "upgrade handler threw");
        socket.destroy();
      }
    },
  };
}

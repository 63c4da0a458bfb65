import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { applyCors } from "./cors.js";
import type { Logger } from "./log.js";

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;
/** The daemon's request handler, as the HTTP/1.1 and HTTP/2 servers call it. */
export type Handler = (req: Req, res: Res) => void;

/** GET /health's answer, the same whether the gate or the full handler's route gives it. */
export function answerHealth(res: Res): void {
  res.statusCode = 204;
  res.setHeader("Cache-Control", "no-store");
  res.end();
}

/**
 * A plain `GET /health`: HTTP/1.x, no query, no body, no Origin. The full handler answers such a
 * request with CORS's fixed headers and a 204 whatever its state (before /init too), so the gate
 * can give that same answer before the rest of the daemon has loaded.
 */
function plainHealth(req: Req): boolean {
  const h = req.headers;
  return (
    req.method === "GET" && req.url === "/health" && req.httpVersionMajor === 1 &&
    h.origin === undefined && h["content-length"] === undefined && h["transfer-encoding"] === undefined
  );
}

/**
 * The request handler while the daemon is still loading. envd listens as soon as its HTTP server
 * exists, then loads everything else (RPC services, routes, their protobuf descriptors), which
 * takes about as long again as Node's own start. Meanwhile a plain GET /health is answered at
 * once, and every other request waits, in arrival order, for the full handler, which `open()`
 * installs. `load` is called once: on the first request that must wait, once the first early
 * answer is out, or `fallbackMs` after `armed()` (so a daemon nobody talks to still loads).
 */
export class EarlyGate {
  private handler?: Handler;
  private readonly waiting: { req: Req; res: Res; gone: boolean }[] = [];
  private loadAsked = false;
  private fallback?: NodeJS.Timeout;
  private operations = 0;

  constructor(
    private readonly log: Logger,
    private readonly load: () => void,
    private readonly fallbackMs = 50,
  ) {}

  /** The handler the servers are given: the gate until `open()`, then the full handler. */
  readonly handle: Handler = (req, res) => {
    if (this.handler) return this.handler(req, res);
    try {
      if (plainHealth(req)) return this.answerEarly(req, res);
    } catch (err) {
      this.log.warn({ err: String(err) }, "early health answer failed");
    }
    const entry = { req, res, gone: false };
    res.once("close", () => void (entry.gone = true));
    this.waiting.push(entry);
    this.askLoad();
  };

  /** Starts the fallback timer: call once the daemon listens. */
  armed(): void {
    this.fallback = setTimeout(() => this.askLoad(), this.fallbackMs);
  }

  /** Installs the full handler and passes it the requests that waited (those whose client left are dropped). */
  open(handler: Handler): void {
    this.handler = handler;
    clearTimeout(this.fallback);
    for (const { req, res, gone } of this.waiting.splice(0)) {
      if (gone) this.log.info({ method: req.method, path: (req.url ?? "").split("?", 1)[0].slice(0, 200) }, "client left while envd was loading");
      else handler(req, res);
    }
  }

  /** Operation ids the gate used, so the full handler's access log continues after them. */
  get operationsUsed(): number {
    return this.operations;
  }

  private answerEarly(req: Req, res: Res): void {
    const started = process.hrtime.bigint();
    const op = ++this.operations;
    res.once("close", () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      this.log.debug({ operation_id: op, method: req.method, path: "/health", status: res.statusCode, ms: Math.round(ms * 100) / 100 }, "request");
    });
    res.once("finish", () => setImmediate(() => this.askLoad()));
    applyCors(req, res);
    answerHealth(res);
  }

  private askLoad(): void {
    if (this.loadAsked) return;
    this.loadAsked = true;
    clearTimeout(this.fallback);
    setImmediate(this.load);
  }
}

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { compressionBrotli, connectNodeAdapter } from "@connectrpc/connect-node";
import { createContextValues, type ConnectRouter, type ConnectRouterOptions } from "@connectrpc/connect";
import { adaptiveCompressionGzip } from "./gzip-compression.js";
import { createAdmission } from "./admission.js";
import { applyCors } from "./cors.js";
import { HttpError, writeError, type AnyResponse } from "./errors.js";
import { createFastUnary, type ServiceEntry } from "./fast-unary.js";
import { createFastStream } from "./fast-stream.js";
import { serviceWithFrames, type FramedMethod } from "./framed-stream.js";
import { flushedKey, type DirectStreams, type FrameEncoder } from "../stream/contract.js";
import { legacyInterceptor } from "./legacy.js";
import { checkAuthority, guarded, parseTarget } from "./guard.js";
import { boundDrainAfterAnswer, closeStreamAfterAnswer } from "./drain.js";
import { identityInterceptor, recordInterceptor, recordKey, type RequestRecord } from "./interceptors.js";
import type { Route } from "./routes.js";
import type { Deps } from "../deps.js";
import { userFromBasic } from "../auth/identity.js";

/** HTTP/2's NO_ERROR code (node:http2 itself loads only when a client speaks HTTP/2). */
const NGHTTP2_NO_ERROR = 0;

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

/**
 * The requests admitted a turn's budget at a time (see createAdmission): each sets up something
 * that lives on (a process and its pipes; a recursive watch), and they come in bursts.
 */
const ADMITTED = new Set(["/process.Process/Start", "/filesystem.Filesystem/WatchDir"]);

/** What a daemon that must wait for /init (see SandboxState.closedUntilInit) serves meanwhile. */
const OPEN_BEFORE_INIT = new Set(["GET /health", "POST /init"]);
const NOT_INITIALIZED = "envd not initialized";

const UNAUTHORIZED = "unauthorized access, please provide a valid access token or method signing if supported";

/** What the request handler is built from. */
export interface HandlerParts {
  deps: Deps;
  routes: Route[];
  /**
   * The RPC services; those with `frames` answer uncompressed Connect streams with its frames,
   * and their methods in `direct` are called without connect-es's layers (direct-stream.ts).
   */
  services: (ServiceEntry & { frames?: FrameEncoder; direct?: DirectStreams })[];
  shutdownSignal: AbortSignal;
  /** The access log's first operation id (the early gate's answers took those before it). */
  firstOperationId?: number;
}

/** Builds the one request handler: CORS → token gate → plain routes or Connect, with one access-log line. */
export function createHandler({ deps, routes, services, shutdownSignal, firstOperationId = 1 }: HandlerParts): (req: Req, res: Res) => void {
  let operationId = firstOperationId - 1;
  const records = new WeakMap<Req, RequestRecord>();
  const responses = new WeakMap<Req, Res>();
  const table = new Map<string, Route[]>();
  for (const r of routes) table.set(r.path, [...(table.get(r.path) ?? []), r]);

  const routerOptions: ConnectRouterOptions = {
    interceptors: [recordInterceptor(), identityInterceptor(deps), legacyInterceptor()],
    readMaxBytes: deps.config.maxMessageBytes,
    // connect-node's default codings, spelled out (services registered by hand get these options
    // as given); gzip's effort follows the data, as downloads' does.
    acceptCompression: [adaptiveCompressionGzip, compressionBrotli],
    // Small messages (output lines, events) stream uncompressed: gzip per message costs more CPU
    // than it saves on a sandbox link. Large ones (big listings) are compressed when the client asks.
    compressMinBytes: 64 * 1024,
    shutdownSignal,
  };
  const framed = new Map<string, FramedMethod>();
  const register = (router: ConnectRouter): void => {
    for (const { service, impl, frames, direct } of services) {
      if (frames) serviceWithFrames(router, routerOptions, service, impl, frames, framed, direct);
      else router.service(service, impl);
    }
  };
  const contextValues = (req: Req) => {
    const res = responses.get(req);
    // writableLength counts what the response and its socket (or HTTP/2 stream) still buffer.
    return createContextValues()
      .set(recordKey, records.get(req))
      .set(flushedKey, res && (() => res.writableLength === 0));
  };
  // The fast paths build the context values only for the calls they take; connect-node, for the rest.
  const fastUnary = createFastUnary(routerOptions, services, contextValues);
  const fastStream = createFastStream(routerOptions, framed, contextValues, (authorization) => userFromBasic(authorization, deps));
  const connect = connectNodeAdapter({
    ...routerOptions,
    routes: register,
    contextValues,
    fallback: (_req, res) => {
      res.writeHead(404, { "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff" });
      res.end("404 page not found\n");
    },
  });

  const admit = createAdmission();
  const handle = (req: Req, res: Res, started: bigint): void => {
    const rec: RequestRecord = {};
    records.set(req, rec);
    const op = ++operationId;
    res.on("close", () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const path = rec.procedure ?? pathOf(req);
      // the host's probes (health every few seconds, metrics every 5 s) stay out of the sandbox's log
      const probe = req.method === "GET" && res.statusCode < 300 && (path === "/health" || path === "/metrics");
      (probe ? deps.log.debug : deps.log.info)(
        { operation_id: op, method: req.method, path, status: res.statusCode, code: rec.code, ms: Math.round(ms * 100) / 100 },
        "request",
      );
    });
    // A body left unread by the answer is drained within bounds (HTTP/1.1) or its stream reset
    // (HTTP/2; Connect calls do that after their trailers instead, see releaseUnreadBody).
    const cancelStreamReset = req.httpVersionMajor === 2
      ? closeStreamAfterAnswer(req as Http2ServerRequest)
      : (boundDrainAfterAnswer(req as IncomingMessage, res as ServerResponse), undefined);
    if (applyCors(req, res)) return;
    const url = parseTarget(req.url);
    const candidates = table.get(url.pathname);
    const route = candidates?.find((r) => r.method === req.method);
    if (deps.state.closedUntilInit && !OPEN_BEFORE_INIT.has(`${req.method} ${url.pathname}`)) {
      writeError(res as AnyResponse, new HttpError(401, NOT_INITIALIZED));
      return;
    }
    if (!gate(req, route, deps)) {
      writeError(res as AnyResponse, new HttpError(401, UNAUTHORIZED));
      return;
    }
    if (candidates) {
      if (!route) {
        res.writeHead(405, { "Content-Type": "text/plain; charset=utf-8", Allow: candidates.map((r) => r.method).join(", ") });
        res.end("Method Not Allowed\n");
        return;
      }
      Promise.resolve()
        .then(() => route.handler({ req, res: res as AnyResponse, url, query: url.searchParams, log: deps.log }))
        .catch((err) => {
          if (!(err instanceof HttpError)) deps.log.warn({ operation_id: op, path: url.pathname, err: String(err) }, "route failed");
          writeError(res as AnyResponse, err);
        });
      return;
    }
    responses.set(req, res);
    cancelStreamReset?.();
    releaseUnreadBody(req);
    // Plain Connect calls (what the SDKs send) skip connect-node's generic plumbing; the rest goes through it.
    if (fastUnary(req, res) || fastStream(req, res)) return;
    checkAuthority(req);
    failWritesOnClose(res);
    connect(req, res);
  };

  // Every entry into the handling is guarded: whatever a request makes it throw ends that
  // request (400 or 500), never the daemon.
  return (req, res) => {
    const started = process.hrtime.bigint();
    const path = pathOf(req);
    if (!ADMITTED.has(path)) return guarded(req, res, deps.log, () => handle(req, res, started));
    let gone = false;
    const onClose = (): void => void (gone = true);
    res.once("close", onClose);
    admit(() => {
      res.off("close", onClose);
      // A client that left while its request waited gets no process (or watch).
      if (!gone) return guarded(req, res, deps.log, () => handle(req, res, started));
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      deps.log.info({ method: req.method, path, ms: Math.round(ms * 100) / 100 }, "client left before its request was admitted");
    });
  };
}

/**
 * connect-node abandons a body it rejects (oversize or malformed envelope) with bytes still on
 * the wire. HTTP/1.1: the bounded drain set up for every request discards them (or closes the
 * connection). HTTP/2: after the trailers, reset the stream with NO_ERROR (RFC 9113 §8.1), or
 * its unread data holds the session's flow-control window.
 */
function releaseUnreadBody(req: Req): void {
  if (req.httpVersionMajor === 2) {
    const stream = (req as Http2ServerRequest).stream;
    // The compat layer's own listener (registered first) has just sent the trailers.
    stream.on("wantTrailers", () => {
      if (!req.complete && !stream.destroyed) setImmediate(() => stream.close(NGHTTP2_NO_ERROR));
    });
  }
}

/**
 * connect-node waits for 'drain' or 'error' after a write the socket could not take at once.
 * An HTTP/2 stream the client cancels only closes, so that wait (and the stream's source, holding
 * a process subscription that pauses the process) would last forever: turn an early close into
 * the error connect-node reads as "client hung up" (ERR_STREAM_DESTROYED → aborted, not logged).
 */
function failWritesOnClose(res: Res): void {
  res.once("close", () => {
    if (res.writableFinished || res.listenerCount("error") === 0) return;
    res.emit("error", Object.assign(new Error("the client closed the stream"), { code: "ERR_STREAM_DESTROYED" }));
  });
}

function pathOf(req: Req): string {
  const u = req.url ?? "/";
  const q = u.indexOf("?");
  return q < 0 ? u : u.slice(0, q);
}

/** The X-Access-Token gate: open when no token is set or the route is exempt; else the header must match. */
function gate(req: Req, route: Route | undefined, deps: Deps): boolean {
  if (!deps.state.token.isSet || route?.exempt) return true;
  const header = req.headers["x-access-token"];
  return deps.state.token.equals(Array.isArray(header) ? header[0] : header);
}

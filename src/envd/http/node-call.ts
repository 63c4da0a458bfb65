import { getEventListeners } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues, type HandlerContext } from "@connectrpc/connect";
import { headerContentType } from "@connectrpc/connect/protocol-connect";

// Node-level pieces of the fast Connect paths (fast-unary.ts, fast-stream.ts): what connect-node
// does per call with its universal request and response objects, done on Node's own.

export type Req = IncomingMessage | Http2ServerRequest;
export type Res = ServerResponse | Http2ServerResponse;

/** The part of a method's implementation spec a context is built from. */
export interface CallSpec {
  method: DescMethod;
}

/**
 * The reason a call's signal carries when its client left: not a ConnectError, so a stream
 * waiting for its next event ends quietly (nobody is left to read an error), as on
 * connect-node's HTTP/1.1 path.
 */
export const CLIENT_GONE = new Error("the client closed the connection");

/**
 * The reason the context's signal carries once the call is over, shared: aborting without one
 * builds a DOMException with a stack trace per call, for listeners that are being torn down.
 * Plain Errors both: a ConnectError made here would load undici at start (its metadata is a
 * Headers), ~6 MiB of idle RSS.
 */
export const CALL_DONE = new Error("the call has ended");

export type CallContext = HandlerContext & { abort(reason?: unknown): void };

/**
 * A call's abort signal: aborted by the deadline (connect-es's words), the daemon's shutdown
 * (its reason), the client leaving, or the end of the call (CALL_DONE; skipped when nothing
 * listens to the signal then). One AbortController: connect-es links three per call.
 */
export class CallSignal {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly forget: (() => void) | undefined;
  /** When the deadline passes (Date.now() ms), if there is one. */
  readonly deadline: number | undefined;

  constructor(timeoutMs: number | undefined, shutdown: AbortSignal | undefined) {
    if (timeoutMs !== undefined) {
      this.deadline = Date.now() + timeoutMs;
      this.timer = setTimeout(() => this.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded)), timeoutMs);
    }
    if (shutdown?.aborted) this.abort(shutdown.reason);
    else if (shutdown) this.forget = onShutdown(shutdown, (reason) => this.abort(reason));
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  abort(reason?: unknown): void {
    clearTimeout(this.timer);
    this.forget?.();
    const signal = this.controller.signal;
    if (signal.aborted) return;
    // A call that ended with nothing listening to its signal (a Stat, most unary calls): no
    // event to build and dispatch (Event objects made this a tenth of a Stat's cost).
    if (reason === undefined && getEventListeners(signal, "abort").length === 0) return;
    this.controller.abort(reason ?? CALL_DONE);
  }
}

/**
 * The call's HandlerContext, as connect-es's createHandlerContext builds it but with one
 * CallSignal; connect-es also copies the request headers again for every call.
 */
export function callContext(spec: CallSpec, requestHeader: Headers, path: string, timeoutMs: number | undefined, shutdown: AbortSignal | undefined, values: ContextValues, contentType: string): CallContext {
  const call = new CallSignal(timeoutMs, shutdown);
  return {
    ...spec,
    service: spec.method.parent,
    requestMethod: "POST",
    protocolName: "connect",
    url: `http://${requestHeader.get("host") ?? "localhost"}${path}`,
    signal: call.signal,
    timeoutMs: () => (call.deadline === undefined ? undefined : call.deadline - Date.now()),
    requestHeader,
    responseHeader: new Headers({ [headerContentType]: contentType }),
    responseTrailer: new Headers(),
    values,
    abort: (reason) => call.abort(reason),
  };
}

/** The calls to abort when a shutdown signal fires: one listener on it, not one per call. */
const shutdownCalls = new WeakMap<AbortSignal, Set<(reason: unknown) => void>>();

/** Has `abort` called with the reason of `shutdown` when it fires; returns the undo. */
function onShutdown(shutdown: AbortSignal, abort: (reason: unknown) => void): () => void {
  const calls = shutdownCalls.get(shutdown) ?? watchShutdown(shutdown);
  calls.add(abort);
  return () => void calls.delete(abort);
}

function watchShutdown(shutdown: AbortSignal): Set<(reason: unknown) => void> {
  const calls = new Set<(reason: unknown) => void>();
  shutdownCalls.set(shutdown, calls);
  shutdown.addEventListener("abort", () => {
    for (const abort of [...calls]) abort(shutdown.reason);
  }, { once: true });
  return calls;
}

/** The request body's chunks, read until its end or until more than `max` bytes came. */
export function bodyChunks(req: Req, max: number): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let count = 0;
    const settle = (err?: Error): void => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", settle);
      req.off("close", onClose);
      if (err) reject(new ConnectError(`failed to read the request body: ${err.message}`, Code.Aborted));
      else resolve(chunks);
    };
    const onEnd = (): void => settle();
    // A client that leaves mid-body: HTTP/2 requests only close.
    const onClose = (): void => settle(new Error("the client closed the request"));
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk);
      count += chunk.length;
      // readAllBytes words the limit error; the rest of the body is left to the HTTP layer.
      if (count > max) {
        req.pause();
        settle();
      }
    };
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", settle);
    req.once("close", onClose);
  });
}

export async function* iterate(chunks: Buffer[]): AsyncGenerator<Uint8Array> {
  yield* chunks;
}

/** A request header by its name in any case (connect-es spells them "Content-Type"). */
export function header(req: Req, name: string): string | null {
  const v = req.headers[name.toLowerCase()];
  return Array.isArray(v) ? v.join(", ") : (v ?? null);
}

/** Node's request headers as web Headers, pseudo-headers left out (as connect-node does). */
export function webHeaders(req: Req): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (k.startsWith(":") || v === undefined) continue;
    if (Array.isArray(v)) for (const e of v) h.append(k, e);
    else h.append(k, String(v));
  }
  return h;
}

/** Web Headers as a Node header object; repeated names (Set-Cookie) become arrays. */
export function nodeHeaders(h: Headers): Record<string, string | string[]> {
  const o: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  h.forEach((value, key) => {
    const prev = o[key];
    o[key] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  });
  return o;
}

/**
 * Where an answer goes. HTTP/2, once the request body has been read: straight on the stream,
 * END_STREAM on the last DATA frame. Node's compatibility response always asks nghttp2 to wait
 * for trailers and sends them from a setImmediate, which queues their write after the turn's
 * HTTP/2 writes have gone: the answer's end waits for the next turn of the event loop, a whole
 * poll phase under load. An answer that leaves the request body unread takes the compatibility
 * path: its trailers are where the stream is then reset (see releaseUnreadBody in handler.ts).
 */
export interface AnswerSink {
  head(status: number, headers: Record<string, string | string[]>): void;
  /** False: wait for 'drain' (or 'close') on `events`. */
  write(chunk: Uint8Array): boolean;
  end(chunk?: Uint8Array): void;
  /** What emits 'drain' and 'close' for the writes. */
  events: NodeJS.EventEmitter;
}

export function answerSink(req: Req, res: Res): AnswerSink {
  if (req.httpVersionMajor !== 2 || !req.complete) {
    return {
      head: (status, headers) => void res.writeHead(status, headers),
      write: (chunk) => (res as NodeJS.WritableStream).write(chunk),
      end: (chunk) => void (chunk ? res.end(chunk) : res.end()),
      events: res,
    };
  }
  const h2res = res as Http2ServerResponse;
  // Its errors (a write the client's reset made fail) are swallowed by the compatibility layer's
  // own listener; the response's 'close' tells the call.
  const stream = h2res.stream;
  return {
    head(status, headers) {
      if (stream.destroyed) return;
      h2res.statusCode = status; // what the access log reports
      // Headers set on the response before (CORS) go too, as writeHead merges them.
      stream.respond({ ...h2res.getHeaders(), ...headers, ":status": status });
    },
    write: (chunk) => stream.write(chunk),
    end: (chunk) => void (stream.destroyed || (chunk ? stream.end(chunk) : stream.end())),
    events: stream,
  };
}

/** Sends a whole answer (status, headers, body): see AnswerSink. */
export function sendWhole(req: Req, res: Res, status: number, headers: Record<string, string | string[]>, body: Uint8Array): void {
  const sink = answerSink(req, res);
  sink.head(status, headers);
  sink.end(body);
}

/** Resolves true once `res` drained, false if it closed or failed first. */
export function drained(res: NodeJS.EventEmitter): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (ok: boolean) => () => {
      res.off("drain", onDrain);
      res.off("close", onClose);
      resolve(ok);
    };
    const onDrain = done(true);
    const onClose = done(false);
    res.once("drain", onDrain);
    res.once("close", onClose);
  });
}

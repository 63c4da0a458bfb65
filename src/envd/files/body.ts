import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { finished, PassThrough, type Readable, type Transform } from "node:stream";
import { createGunzip } from "node:zlib";
import { HttpError } from "../http/errors.js";
import type { Coding } from "./encoding.js";

type Request = IncomingMessage | Http2ServerRequest;

/** The messages of decompression failures, keyed by the error the gunzip stream emitted. */
const gzipFailures = new WeakMap<object, string>();

/** The client closed the connection before sending the whole body. */
export class ClientAborted extends HttpError {
  constructor() {
    super(400, "request body ended early: the client closed the connection");
  }
}

/**
 * The decoded request body as a stream. The request is piped (not pipelined) into it, so a
 * failure downstream never destroys the request and an error response can still be sent;
 * a client abort destroys the returned stream with ClientAborted.
 */
export function requestBody(req: Request, coding: Coding): Readable {
  const out: Transform = coding === "gzip" ? createGunzip() : new PassThrough();
  if (coding === "gzip") {
    const gunzip = out as ReturnType<typeof createGunzip>;
    gunzip.once("error", (err) => {
      const prefix = gunzip.bytesWritten === 0 ? "failed to create gzip reader: " : "";
      gzipFailures.set(err, `error decompressing request body: ${prefix}${err.message}`);
    });
  }
  // The consumer meets errors through iteration; this listener keeps an abort that comes before
  // it attaches (e.g. a malformed chunked body) from being an uncaught 'error' that kills the daemon.
  out.on("error", () => undefined);
  const stop = finished(req as Readable, (err) => {
    stop();
    if (err && !req.complete) out.destroy(new ClientAborted());
  });
  req.pipe(out);
  return out;
}

/** Stops feeding a request body anywhere and discards the rest, so the connection stays usable. */
export function drainRequest(req: Request): void {
  req.unpipe();
  if (!req.destroyed) req.resume();
}

/**
 * Turns an error raised while reading the request body into the HTTP error we answer:
 * decompression failures and other body faults are the client's (400); `prefix` names the stage.
 */
export function bodyError(err: unknown, prefix = "error reading request body: "): Error {
  if (err instanceof HttpError) return err;
  const gzip = typeof err === "object" && err !== null ? gzipFailures.get(err) : undefined;
  if (gzip) return new HttpError(400, gzip, { cause: err });
  const code = (err as NodeJS.ErrnoException)?.code;
  if (code === "ECONNRESET" || code === "ERR_STREAM_PREMATURE_CLOSE") return new ClientAborted();
  return new HttpError(400, `${prefix}${(err as Error)?.message ?? String(err)}`, { cause: err });
}

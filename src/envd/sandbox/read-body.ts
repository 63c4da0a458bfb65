// Reading a small, bounded request body (the /init body) before its sender is known.
import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { HttpError } from "../http/errors.js";

/** Limits of one small body read: most bytes, and how long the whole body may take to arrive. */
export interface BodyLimits {
  maxBytes: number;
  timeoutMs: number;
}

/**
 * Reads a small request body as UTF-8. More than `maxBytes` (declared or received) is refused
 * with 413, a body still incomplete after `timeoutMs` with 408, without waiting for the rest:
 * what is left unread is then drained within bounds or the connection closed (see drain.ts).
 */
export function readBody(req: IncomingMessage | Http2ServerRequest, { maxBytes, timeoutMs }: BodyLimits): Promise<string> {
  const declared = Number(req.headers["content-length"]);
  if (declared > maxBytes) return Promise.reject(new HttpError(413, `request body larger than ${maxBytes} bytes`));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (err?: Error): void => {
      clearTimeout(timer);
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onClose);
      if (err) {
        // Nothing more is kept: the rest of the body is left to the bounded drain.
        chunks.length = 0;
        req.pause();
        reject(err);
      } else resolve(Buffer.concat(chunks).toString("utf8"));
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBytes) settle(new HttpError(413, `request body larger than ${maxBytes} bytes`));
      else chunks.push(chunk);
    };
    const onEnd = (): void => settle();
    const onError = (err: Error): void => settle(new HttpError(400, `request body unreadable: ${err.message}`));
    const onClose = (): void => settle(new HttpError(400, "the client closed the request"));
    const timer = setTimeout(() => settle(new HttpError(408, `request body not received within ${timeoutMs} ms`)), timeoutMs);
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onError);
    req.once("close", onClose);
  });
}

/**
 * A fixed number of slots for bodies read before the sender is known to be authorised: a
 * request that finds none free is refused at once rather than buffered.
 */
export class BodySlots {
  private used = 0;

  constructor(readonly max: number) {}

  /** Takes a slot; returns its release (idempotent), or undefined when all are taken. */
  take(): (() => void) | undefined {
    if (this.used >= this.max) return undefined;
    this.used++;
    let held = true;
    return () => {
      if (held) this.used--;
      held = false;
    };
  }
}

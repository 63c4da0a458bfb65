import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import { constants } from "node:http2";
import { finalStatus, relayableHeaders } from "./answer.js";
import type { AnyResponse } from "../server/request.js";

/**
 * Wraps a handler of upstream events: whatever it throws (a value a writer refuses, a stream in a
 * state nobody foresaw) fails this one request through `onThrow` instead of reaching the event
 * loop, where it would stop the whole process for every tenant.
 */
export function guarded<A extends unknown[]>(onThrow: (err: unknown) => void, fn: (...args: A) => void): (...args: A) => void {
  return (...args: A) => {
    try {
      fn(...args);
    } catch (err) {
      try {
        onThrow(err);
      } catch {
        // Nothing is left to answer on; the request's own close handlers release it.
      }
    }
  };
}

/**
 * Writes the head of the client's answer from an upstream's status and headers, if they can be
 * relayed (a final 200–599 status, valid and bounded headers); false, with nothing written, if not.
 */
export function startAnswer(res: AnyResponse, status: unknown, headers: IncomingHttpHeaders): boolean {
  const code = finalStatus(status);
  const out = code === undefined ? undefined : relayableHeaders(headers);
  if (code === undefined || out === undefined) return false;
  // A 204 has no body by definition; a length on one makes HTTP/2 clients reset the stream.
  if (code === 204) delete out["content-length"];
  try {
    res.writeHead(code, out as OutgoingHttpHeaders & Record<string, string>);
    return true;
  } catch {
    if (!res.headersSent) for (const name of res.getHeaderNames()) res.removeHeader(name);
    return false;
  }
}

/** An HTTP/2 reset code from upstream as one to pass on: a known code, else INTERNAL_ERROR. */
export function resetCode(code: number | undefined): number {
  return code !== undefined && Number.isInteger(code) && code > 0 && code <= constants.NGHTTP2_HTTP_1_1_REQUIRED ? code : constants.NGHTTP2_INTERNAL_ERROR;
}

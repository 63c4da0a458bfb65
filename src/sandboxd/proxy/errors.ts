import { constants, type Http2ServerResponse } from "node:http2";
import type { AnyRequest, AnyResponse } from "../server/request.js";

/** A proxy error page: status, the JSON body E2B's proxy sends, and the sentence for the HTML page. */
export interface ProxyError {
  status: number;
  body: Record<string, unknown>;
}

/** 502 for an unknown, killed or paused sandbox (the SDK reads 502 as "not running"). */
export function sandboxNotFound(sandboxId: string): ProxyError {
  return { status: 502, body: { sandboxId, message: "The sandbox was not found", code: 502 } };
}

/** 502 when the sandbox runs but nothing accepts connections on the port. */
export function portNotOpen(sandboxId: string, port: number): ProxyError {
  return { status: 502, body: { sandboxId, message: "The sandbox is running but port is not open", port, code: 502 } };
}

/** 502 when the port accepted the connection but its answer was not HTTP the proxy can relay. */
export function badGateway(sandboxId: string, port: number): ProxyError {
  return { status: 502, body: { sandboxId, message: "The sandbox's answer on this port could not be relayed", port, code: 502 } };
}

/** 403 when the sandbox requires a traffic token and the request has none. */
export function trafficTokenMissing(sandboxId: string): ProxyError {
  return { status: 403, body: { sandboxId, message: "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing", code: 403 } };
}

/** 403 when the traffic token does not match. */
export function trafficTokenInvalid(sandboxId: string): ProxyError {
  return { status: 403, body: { sandboxId, message: "Sandbox is secured with traffic access token. Provided token in header 'e2b-traffic-access-token' is invalid", code: 403 } };
}

/** 404 for envd's routes meant for the control plane only. */
export function internalRoute(sandboxId: string): ProxyError {
  return { status: 404, body: { sandboxId, message: "This path of the sandbox is not available through the proxy", code: 404 } };
}

/** 400 for a request target that is not a path (`*`, authority form, a malformed URL). */
export function badRequestTarget(sandboxId: string): ProxyError {
  return { status: 400, body: { sandboxId, message: "The request target must be a path", code: 400 } };
}

/** 429 when a sandbox already has as many requests in flight as the proxy allows it. */
export function tooManyConnections(sandboxId: string): ProxyError {
  return { status: 429, body: { sandboxId, message: "The sandbox has too many concurrent connections", code: 429 } };
}

const BROWSER_UA = /Mozilla|Chrome|Safari|Firefox|Edg\/|OPR\/|Opera/;

/** Whether the client looks like a browser navigation (HTML page) rather than a program (JSON), as E2B's proxy decides. */
export function wantsHtml(headers: Record<string, string | string[] | undefined>): boolean {
  const accept = String(headers["accept"] ?? "").toLowerCase();
  if (accept.includes("application/json") && !accept.includes("text/html")) return false;
  const mode = String(headers["sec-fetch-mode"] ?? "").toLowerCase();
  if (["cors", "no-cors", "same-origin", "websocket"].includes(mode)) return false;
  return BROWSER_UA.test(String(headers["user-agent"] ?? ""));
}

/** The error as raw bytes of a response body and its content type. */
export function renderError(err: ProxyError, html: boolean): { type: string; body: string } {
  if (!html) return { type: "application/json", body: JSON.stringify(err.body) };
  const message = String(err.body.message).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const page = `<!doctype html><html><head><meta charset="utf-8"><title>${err.status}</title></head><body><h1>${err.status}</h1><p>${message}</p></body></html>\n`;
  return { type: "text/html; charset=utf-8", body: page };
}

/** Answers a request with a proxy error, unless an answer has already started (then the stream is cut). */
export function sendError(req: AnyRequest, res: AnyResponse, err: ProxyError): void {
  const { type, body } = renderError(err, wantsHtml(req.headers));
  answer(res, err.status, { "content-type": type, "content-length": Buffer.byteLength(body), "cache-control": "no-store" }, body);
}

/**
 * Writes a whole answer of the proxy's own, or cuts the response when an answer has already
 * started (an HTTP/2 stream is reset with an error code, so the client never takes a truncated
 * answer for a complete one). Never throws: it runs inside upstream event handlers.
 */
function answer(res: AnyResponse, status: number, headers: Record<string, string | number>, body: string): void {
  try {
    if (res.headersSent) return cutResponse(res);
    res.writeHead(status, headers);
    res.end(body);
  } catch {
    cutResponse(res);
  }
}

/**
 * Ends a client's answer that cannot be completed so that the client sees a failure, never a
 * clean but truncated answer: an HTTP/2 stream is reset with INTERNAL_ERROR (a bare destroy
 * closes it with NO_ERROR), an HTTP/1.1 connection is destroyed mid-body.
 */
export function cutResponse(res: AnyResponse): void {
  try {
    const stream = (res as Http2ServerResponse).stream as Http2ServerResponse["stream"] | undefined;
    if (stream === undefined) return void res.destroy();
    if (!stream.destroyed && !stream.closed) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
  } catch {
    // The response is already gone.
  }
}

/** Answers with plain text, as Go's http.Error does (body, newline, nosniff). */
export function sendText(res: AnyResponse, status: number, text: string): void {
  const body = text + "\n";
  answer(res, status, { "content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff", "content-length": Buffer.byteLength(body) }, body);
}

import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { MAX_INFORMATIONAL, finalStatus, relayableRawLines } from "./answer.js";
import { connectTimeout, upstreamRequest, type Upstream } from "./http1.js";
import { isDialFailure, type ProxyLimits } from "./dial.js";
import { badGateway, portNotOpen, renderError, wantsHtml, type ProxyError } from "./errors.js";
import { guarded } from "./relay.js";

/** Writes a whole HTTP/1.1 response on a raw socket and closes it (the socket was never handed to an HTTP server response). */
export function writeRawError(req: IncomingMessage, socket: Duplex, err: ProxyError): void {
  const { type, body } = renderError(err, wantsHtml(req.headers));
  writeRaw(socket, err.status, { "content-type": type, "content-length": String(Buffer.byteLength(body)), connection: "close" }, body);
}

/** Writes a status line, headers and body on a raw socket, then ends it. */
export function writeRaw(socket: Duplex, status: number, headers: Record<string, string>, body: string): void {
  if (!socket.writable) return void socket.destroy();
  const head = [`HTTP/1.1 ${status} ${statusText(status)}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), "", ""].join("\r\n");
  socket.end(head + body);
}

function statusText(status: number): string {
  return { 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 429: "Too Many Requests", 502: "Bad Gateway", 503: "Service Unavailable" }[status] ?? "Error";
}

const REASON = /^[\t\x20-\x7e\x80-\xff]{0,256}$/;

/**
 * The raw head of an upstream response (names' case and repeats kept) as bytes, or undefined when
 * it cannot be relayed (a bad status, reason or field). For a declined upgrade the body arrives
 * decoded, so its framing headers go and the connection's close ends it.
 */
function rawHead(res: IncomingMessage, declined: boolean): Buffer | undefined {
  const status = declined ? finalStatus(res.statusCode) : res.statusCode === 101 ? 101 : undefined;
  const reason = res.statusMessage ?? "";
  if (status === undefined || !REASON.test(reason)) return undefined;
  const skip = (name: string) => declined && (name === "transfer-encoding" || name === "connection" || name === "keep-alive");
  const lines = relayableRawLines(res.rawHeaders, skip);
  if (!lines) return undefined;
  if (declined) lines.push("Connection: close");
  // The parser decoded the head as latin1; written back the same way, its bytes are unchanged.
  return Buffer.from([`HTTP/1.1 ${status} ${reason}`, ...lines].join("\r\n") + "\r\n\r\n", "latin1");
}

/**
 * Relays an HTTP/1.1 Upgrade (WebSocket): the handshake goes upstream on its own connection; a
 * 101 joins the two sockets raw both ways; any other answer is relayed and both are closed. An
 * answer that cannot be relayed (bad status or fields, a 1xx flood, no answer) gets a 502.
 */
export function forwardUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, up: Upstream, limits: ProxyLimits, done: () => void): void {
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    done();
  };
  const upReq = upstreamRequest(req.method, up, false);
  let answered = false;
  let informational = 0;
  /** The upstream's answer is unusable: a 502 if nothing was relayed yet, else the client's socket is closed. */
  const fail = (err?: unknown) => {
    upReq.destroy();
    if (answered) return void socket.destroy();
    answered = true;
    writeRawError(req, socket, err !== undefined && isDialFailure(err) ? portNotOpen(up.sandboxID, up.port) : badGateway(up.sandboxID, up.port));
    finish();
  };
  upReq.on("socket", (s) => connectTimeout(s, limits.connectTimeoutMs));
  socket.on("error", () => upReq.destroy());
  socket.on("close", () => {
    upReq.destroy();
    finish();
  });
  upReq.on("error", guarded(fail, (err: Error) => fail(err)));
  upReq.on("information", guarded(fail, () => {
    if (++informational > MAX_INFORMATIONAL) fail();
  }));
  upReq.on("close", guarded(fail, () => {
    if (!answered) fail();
  }));
  upReq.on("upgrade", guarded(fail, (upRes: IncomingMessage, upSocket: Duplex, upHead: Buffer) => {
    upSocket.on("error", () => socket.destroy());
    const bytes = rawHead(upRes, false);
    if (!bytes) {
      upSocket.destroy();
      return fail();
    }
    answered = true;
    socket.write(bytes);
    if (upHead.length > 0) socket.write(upHead);
    upSocket.pipe(socket);
    socket.pipe(upSocket);
    socket.on("error", () => upSocket.destroy());
    upSocket.on("close", () => socket.destroy());
    socket.on("close", () => upSocket.destroy());
  }));
  upReq.on("response", guarded(fail, (upRes: IncomingMessage) => {
    // The sandbox declined the upgrade: relay its answer and close; this connection is done.
    upRes.on("error", () => socket.destroy());
    const bytes = rawHead(upRes, true);
    if (!bytes) {
      upRes.destroy();
      return fail();
    }
    answered = true;
    socket.write(bytes);
    upRes.pipe(socket);
    // A body cut short must not read as complete: the client's socket is destroyed, not ended.
    upRes.on("close", () => {
      if (!upRes.complete) socket.destroy();
    });
  }));
  if (head.length > 0) upReq.write(head);
  upReq.end();
}

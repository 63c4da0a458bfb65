import { request, type IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { connectTimeout, type Upstream } from "./http1.js";
import { isDialFailure, type ProxyLimits } from "./dial.js";
import { badGateway, portNotOpen, renderError, wantsHtml, type ProxyError } from "./errors.js";

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

/**
 * The raw header block of an upstream response (names' case and repeats kept). For a declined
 * upgrade the body arrives decoded, so its framing headers go and the connection's close ends it.
 */
function rawHead(res: IncomingMessage, declined: boolean): string {
  const lines = [`HTTP/1.1 ${res.statusCode} ${res.statusMessage ?? ""}`];
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    const name = res.rawHeaders[i].toLowerCase();
    if (declined && (name === "transfer-encoding" || name === "connection" || name === "keep-alive")) continue;
    lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
  }
  if (declined) lines.push("Connection: close");
  return lines.join("\r\n") + "\r\n\r\n";
}

/**
 * Relays an HTTP/1.1 Upgrade (WebSocket): the handshake goes upstream on its own connection; a
 * 101 joins the two sockets raw both ways; any other answer is relayed and both are closed.
 */
export function forwardUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, up: Upstream, limits: ProxyLimits, done: () => void): void {
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    done();
  };
  const upReq = request({ host: up.ip, port: up.port, method: req.method, path: up.path, headers: up.headers, agent: false, setHost: false });
  upReq.on("socket", (s) => connectTimeout(s, limits.connectTimeoutMs));
  socket.on("error", () => upReq.destroy());
  socket.on("close", () => {
    upReq.destroy();
    finish();
  });
  let answered = false;
  upReq.on("error", (err) => {
    if (answered) return void socket.destroy();
    writeRawError(req, socket, isDialFailure(err) ? portNotOpen(up.sandboxID, up.port) : badGateway(up.sandboxID, up.port));
    finish();
  });
  upReq.on("upgrade", (upRes: IncomingMessage, upSocket: Duplex, upHead: Buffer) => {
    answered = true;
    socket.write(rawHead(upRes, false));
    if (upHead.length > 0) socket.write(upHead);
    upSocket.pipe(socket);
    socket.pipe(upSocket);
    upSocket.on("error", () => socket.destroy());
    socket.on("error", () => upSocket.destroy());
    upSocket.on("close", () => socket.destroy());
    socket.on("close", () => upSocket.destroy());
  });
  upReq.on("response", (upRes: IncomingMessage) => {
    // The sandbox declined the upgrade: relay its answer and close; this connection is done.
    answered = true;
    socket.write(rawHead(upRes, true));
    upRes.pipe(socket);
    upRes.on("error", () => socket.destroy());
  });
  if (head.length > 0) upReq.write(head);
  upReq.end();
}

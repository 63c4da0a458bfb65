import { createConnection } from "node:net";
import { connect, constants, type ClientHttp2Session, type Http2ServerRequest, type Http2ServerResponse, type IncomingHttpHeaders } from "node:http2";
import { isDialFailure, timeoutError, type ProxyLimits } from "./dial.js";
import { endToEnd } from "./headers.js";
import { badGateway, portNotOpen, sendError, type ProxyError } from "./errors.js";
import type { Upstream } from "./http1.js";

/**
 * One h2c session per sandbox and address, made on first use and dropped when it closes or goes
 * away (keyed by sandbox too: a killed sandbox's address is reused by the next one).
 */
export class H2cPool {
  private readonly sessions = new Map<string, ClientHttp2Session>();

  constructor(private readonly limits: ProxyLimits) {}

  /** The live session to ip:port, connecting if there is none. */
  session(sandboxID: string, ip: string, port: number): ClientHttp2Session {
    const key = `${sandboxID}@${ip}:${port}`;
    const known = this.sessions.get(key);
    if (known && !known.closed && !known.destroyed) return known;
    const session = connect(`http://${ip}:${port}`, { settings: { enablePush: false }, createConnection: () => createConnection({ host: ip, port, noDelay: true }) });
    this.sessions.set(key, session);
    const forget = () => {
      if (this.sessions.get(key) === session) this.sessions.delete(key);
    };
    const timer = setTimeout(() => session.destroy(timeoutError("connect")), this.limits.connectTimeoutMs);
    session.once("connect", () => clearTimeout(timer));
    session.once("close", () => {
      clearTimeout(timer);
      forget();
    });
    session.once("goaway", forget);
    // Errors reach the streams that were using the session; the session itself only has to go.
    session.on("error", forget);
    session.setTimeout(this.limits.idleTimeoutMs, () => session.close());
    return session;
  }

  /** Closes every session (streams in flight are cut). */
  close(): void {
    for (const s of this.sessions.values()) s.destroy();
    this.sessions.clear();
  }
}

/**
 * Forwards one HTTP/2 request over h2c: bodies are piped both ways (flow control is the
 * backpressure), trailers are relayed (gRPC status lives there), and a reset on either side
 * resets the other.
 */
export function forwardHttp2(req: Http2ServerRequest, res: Http2ServerResponse, up: Upstream, pool: H2cPool, done: (status: number | ProxyError) => void): void {
  let settled = false;
  const finish = (what: number | ProxyError) => {
    if (settled) return;
    settled = true;
    done(what);
  };
  let stream;
  try {
    const session = pool.session(up.sandboxID, up.ip, up.port);
    stream = session.request({ ":method": req.method, ":path": up.path, ":scheme": "http", ...up.headers }, { endStream: false });
  } catch (err) {
    const e = isDialFailure(err) ? portNotOpen(up.sandboxID, up.port) : badGateway(up.sandboxID, up.port);
    sendError(req, res, e);
    finish(e);
    return;
  }
  let trailers: IncomingHttpHeaders | undefined;
  // Set once the whole answer is handed to the client; a close before that is the client leaving.
  let answered = false;
  stream.on("response", (headers) => {
    const status = Number(headers[":status"] ?? 502);
    res.writeHead(status, endToEnd(headers) as Record<string, string>);
    stream.pipe(res as unknown as NodeJS.WritableStream, { end: false });
  });
  stream.on("trailers", (t) => (trailers = t));
  stream.on("end", () => {
    if (!res.headersSent) return;
    // A reset also ends the readable side; it must reach the client as a reset, not a clean end.
    if (stream.rstCode !== undefined && stream.rstCode !== constants.NGHTTP2_NO_ERROR) {
      if (!res.stream.destroyed) res.stream.close(stream.rstCode);
      finish(res.statusCode);
      return;
    }
    if (trailers) {
      const t = endToEnd(trailers);
      if (Object.keys(t).length > 0) res.addTrailers(t as Record<string, string>);
    }
    answered = true;
    res.end();
    finish(res.statusCode);
  });
  stream.on("error", (err) => {
    if (!res.headersSent) {
      const e = isDialFailure(err) ? portNotOpen(up.sandboxID, up.port) : badGateway(up.sandboxID, up.port);
      answered = true;
      sendError(req, res, e);
      finish(e);
    }
  });
  stream.on("close", () => {
    // An upstream reset after the answer began resets the client's stream with the same code.
    if (res.headersSent && !answered) {
      const code = stream.rstCode && stream.rstCode !== constants.NGHTTP2_NO_ERROR ? stream.rstCode : constants.NGHTTP2_INTERNAL_ERROR;
      if (!res.stream.destroyed) res.stream.close(code);
      finish(res.statusCode);
    } else if (!res.headersSent && !settled) {
      const e = badGateway(up.sandboxID, up.port);
      answered = true;
      sendError(req, res, e);
      finish(e);
    }
  });
  res.on("close", () => {
    if (!answered && !stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
    finish(res.statusCode);
  });
  req.on("error", () => {
    if (!stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
  });
  req.pipe(stream);
}

import { createConnection } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream, type Http2ServerRequest, type Http2ServerResponse, type IncomingHttpHeaders } from "node:http2";
import { isDialFailure, timeoutError, type ProxyLimits } from "./dial.js";
import { MAX_INFORMATIONAL, relayableTrailers } from "./answer.js";
import { badGateway, cutResponse, portNotOpen, sendError, type ProxyError } from "./errors.js";
import type { Upstream } from "./http1.js";
import { guarded, resetCode, startAnswer } from "./relay.js";

/**
 * One HTTP/2 session per sandbox, address and scheme (h2c, or h2 over TLS for a port that serves
 * HTTPS), made on first use and dropped when it closes or goes away (keyed by sandbox too: a
 * killed sandbox's address is reused by the next one).
 */
export class H2cPool {
  private readonly sessions = new Map<string, { session: ClientHttp2Session; idle: NodeJS.Timeout }>();

  constructor(private readonly limits: ProxyLimits) {}

  /** The live session to the upstream, connecting if there is none. */
  session(up: Pick<Upstream, "sandboxID" | "ip" | "port" | "tls" | "servername">): ClientHttp2Session {
    const { ip, port } = up;
    const key = `${up.sandboxID}@${ip}:${port}${up.tls ? "/tls" : ""}`;
    const known = this.sessions.get(key);
    if (known && !known.session.closed && !known.session.destroyed) {
      known.idle.refresh();
      return known.session;
    }
    const createConn = up.tls
      ? () => {
          const socket = tlsConnect({ host: ip, port, ALPNProtocols: ["h2"], rejectUnauthorized: false, ...(up.servername ? { servername: up.servername } : {}) });
          socket.setNoDelay(true);
          return socket;
        }
      : () => createConnection({ host: ip, port, noDelay: true });
    const session = connect(`${up.tls ? "https" : "http"}://${ip}:${port}`, { settings: { enablePush: false }, createConnection: createConn });
    // A session given no request this long is closed gracefully (its streams finish). Not the
    // session's own setTimeout: Node keeps that armed after the session closes, holding the closed
    // session, its socket and nghttp2's memory for the whole period after every killed sandbox.
    const idle = setTimeout(() => session.close(), this.limits.idleTimeoutMs);
    idle.unref();
    this.sessions.set(key, { session, idle });
    const forget = () => {
      if (this.sessions.get(key)?.session === session) this.sessions.delete(key);
    };
    const timer = setTimeout(() => session.destroy(timeoutError("connect")), this.limits.connectTimeoutMs);
    session.once("connect", () => clearTimeout(timer));
    session.once("close", () => {
      clearTimeout(timer);
      clearTimeout(idle);
      forget();
    });
    session.once("goaway", forget);
    // Errors reach the streams that were using the session; the session itself only has to go.
    session.on("error", forget);
    return session;
  }

  /** Closes the sessions of sandboxes `routed` says are gone (a killed sandbox's lingers no longer). */
  sweep(routed: (sandboxID: string) => boolean): void {
    for (const [key, s] of this.sessions) {
      if (routed(key.slice(0, key.indexOf("@")))) continue;
      this.sessions.delete(key);
      s.session.destroy();
    }
  }

  /** Sessions held now. */
  size(): number {
    return this.sessions.size;
  }

  /** Closes every session (streams in flight are cut). */
  close(): void {
    for (const s of this.sessions.values()) s.session.destroy();
    this.sessions.clear();
  }
}

/** What a forwarded request's log line tells: whether it opened the session, and when the answer's head came (ms after the request). */
export interface H2Timing {
  dialed: boolean;
  headMs?: number;
}

/**
 * Forwards one HTTP/2 request upstream over HTTP/2: bodies are piped both ways (flow control is
 * the backpressure), trailers are relayed (gRPC status lives there), and a reset on either side
 * resets the other. An answer that cannot be relayed (a status outside 200–599, bad headers, a
 * 1xx flood) gets a 502 on this stream alone.
 */
export function forwardHttp2(req: Http2ServerRequest, res: Http2ServerResponse, up: Upstream, pool: H2cPool, done: (status: number | ProxyError, timing?: H2Timing) => void): void {
  const t0 = performance.now();
  const timing: H2Timing = { dialed: false };
  let settled = false;
  const finish = (what: number | ProxyError) => {
    if (settled) return;
    settled = true;
    done(what, timing);
  };
  let stream: ClientHttp2Stream;
  try {
    const before = pool.size();
    const session = pool.session(up);
    timing.dialed = pool.size() > before;
    stream = session.request({ ":method": req.method, ":path": up.path, ":scheme": up.tls ? "https" : "http", ...up.headers }, { endStream: false });
  } catch (err) {
    const e = isDialFailure(err) ? portNotOpen(up.sandboxID, up.port) : badGateway(up.sandboxID, up.port);
    sendError(req, res, e);
    finish(e);
    return;
  }
  let trailers: IncomingHttpHeaders | undefined;
  // Set once the whole answer is handed to the client (or refused); a close before that is the client leaving.
  let answered = false;
  let responded = false;
  let informational = 0;
  /** The upstream's answer is unusable: 502 if the client's answer has not begun, else reset it. */
  const fail = (err?: unknown, code?: number) => {
    if (!stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
    if (answered) return;
    answered = true;
    if (!res.headersSent) {
      const e = err !== undefined && !responded && isDialFailure(err) ? portNotOpen(up.sandboxID, up.port) : badGateway(up.sandboxID, up.port);
      sendError(req, res, e);
      finish(e);
      return;
    }
    if (code !== undefined && !res.stream.destroyed && !res.stream.closed) res.stream.close(resetCode(code));
    else cutResponse(res);
    finish(res.statusCode);
  };
  stream.on("headers", guarded(fail, () => {
    if (++informational > MAX_INFORMATIONAL) fail();
  }));
  stream.on("response", guarded(fail, (headers: IncomingHttpHeaders) => {
    responded = true;
    timing.headMs = Math.round((performance.now() - t0) * 10) / 10;
    if (!startAnswer(res, headers[":status"], headers)) return fail();
    stream.pipe(res as unknown as NodeJS.WritableStream, { end: false });
  }));
  stream.on("trailers", (t: IncomingHttpHeaders) => (trailers = t));
  stream.on("end", guarded(fail, () => {
    if (!res.headersSent || answered) return;
    // A reset also ends the readable side; it must reach the client as a reset, not a clean end.
    if (stream.rstCode !== undefined && stream.rstCode !== constants.NGHTTP2_NO_ERROR) return fail(undefined, stream.rstCode);
    const t = relayableTrailers(trailers);
    if (Object.keys(t).length > 0) res.addTrailers(t as Record<string, string>);
    answered = true;
    res.end();
    finish(res.statusCode);
  }));
  stream.on("error", guarded(fail, (err: Error) => fail(err, stream.rstCode)));
  stream.on("close", guarded(fail, () => {
    // Closed before a complete answer: an upstream reset reaches the client as a reset (same code),
    // no answer at all as a 502.
    if (!answered) fail(undefined, stream.rstCode);
  }));
  res.on("close", () => {
    if (!answered && !stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
    finish(res.statusCode);
  });
  req.on("error", () => {
    if (!stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
  });
  req.pipe(stream);
}

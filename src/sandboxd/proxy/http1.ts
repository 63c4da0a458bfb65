import { Agent, request, type IncomingMessage, type RequestOptions } from "node:http";
import type { Socket } from "node:net";
import { isDialFailure, timeoutError, type ProxyLimits } from "./dial.js";
import { endToEnd } from "./headers.js";
import { badGateway, portNotOpen, sendError, type AnyRequest, type AnyResponse, type ProxyError } from "./errors.js";

/** Where a request goes and what to send: the sandbox's address, and the headers already rewritten. */
export interface Upstream {
  sandboxID: string;
  ip: string;
  port: number;
  /** The request target in origin form, as checked. */
  path: string;
  headers: Record<string, string | string[] | number | undefined>;
}

/**
 * Keep-alive pools per sandbox, not only per address: an address freed by a killed sandbox is
 * handed to the next one, and a pooled connection to the old one must never carry its requests.
 */
class SandboxAgent extends Agent {
  override getName(options: Parameters<Agent["getName"]>[0] & { sandboxID?: string }): string {
    return `${super.getName(options)}:${options?.sandboxID ?? ""}`;
  }
}

/** An HTTP/1.1 keep-alive agent for sandbox ports (sockets idle past the limit are closed). */
export function createAgent(limits: ProxyLimits): Agent {
  return new SandboxAgent({ keepAlive: true, noDelay: true, maxSockets: limits.maxPerSandbox, maxFreeSockets: 32, timeout: limits.idleTimeoutMs, scheduling: "lifo" });
}

/** Arms a connect timeout on a fresh socket: a port that never answers counts as not open. */
export function connectTimeout(socket: Socket, ms: number): void {
  if (!socket.connecting) return;
  const timer = setTimeout(() => socket.destroy(timeoutError("connect")), ms);
  socket.once("connect", () => clearTimeout(timer));
  socket.once("close", () => clearTimeout(timer));
}

/**
 * Forwards one request over HTTP/1.1, streaming both bodies through pipes (backpressure, no
 * buffering) and carrying trailers; `done` runs once when either side is finished or gone.
 */
export function forwardHttp1(req: AnyRequest, res: AnyResponse, up: Upstream, agent: Agent, limits: ProxyLimits, done: (status: number | ProxyError) => void): void {
  let settled = false;
  // Set once the whole answer is handed to the client; a close before that is the client leaving.
  let answered = false;
  const finish = (what: number | ProxyError) => {
    if (settled) return;
    settled = true;
    done(what);
  };
  const upReq = request({ host: up.ip, port: up.port, method: req.method, path: up.path, headers: up.headers, agent, setHost: false, sandboxID: up.sandboxID } as RequestOptions);
  upReq.on("socket", (s) => connectTimeout(s, limits.connectTimeoutMs));
  upReq.on("error", (err) => {
    if (!res.headersSent) {
      const e = isDialFailure(err) ? portNotOpen(up.sandboxID, up.port) : badGateway(up.sandboxID, up.port);
      answered = true;
      sendError(req, res, e);
      finish(e);
    } else {
      res.destroy();
      finish(res.statusCode);
    }
  });
  upReq.on("response", (upRes: IncomingMessage) => {
    res.writeHead(upRes.statusCode ?? 502, endToEnd(upRes.headers) as Record<string, string>);
    upRes.pipe(res as NodeJS.WritableStream, { end: false });
    upRes.on("end", () => {
      const trailers = endToEnd(upRes.trailers);
      if (Object.keys(trailers).length > 0) res.addTrailers(trailers as Record<string, string>);
      answered = true;
      res.end();
      finish(upRes.statusCode ?? 502);
    });
    upRes.on("error", () => {
      res.destroy();
      finish(upRes.statusCode ?? 502);
    });
  });
  // A client that goes away mid-request or mid-answer takes the upstream request with it.
  res.on("close", () => {
    if (!answered) upReq.destroy();
    finish(res.statusCode);
  });
  req.on("error", () => upReq.destroy());
  (req as NodeJS.ReadableStream).pipe(upReq);
}

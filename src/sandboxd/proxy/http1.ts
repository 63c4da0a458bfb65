import { Agent, request, type ClientRequest, type IncomingMessage, type RequestOptions } from "node:http";
import { Agent as TlsAgent, request as tlsRequest } from "node:https";
import type { Socket } from "node:net";
import { isDialFailure, timeoutError, type ProxyLimits } from "./dial.js";
import { MAX_INFORMATIONAL, relayableTrailers } from "./answer.js";
import type { AnyRequest, AnyResponse } from "../server/request.js";
import { badGateway, cutResponse, portNotOpen, sendError, type ProxyError } from "./errors.js";
import { guarded, startAnswer } from "./relay.js";

/** Where a request goes and what to send: the sandbox's address, and the headers already rewritten. */
export interface Upstream {
  sandboxID: string;
  ip: string;
  port: number;
  /** The request target in origin form, as checked. */
  path: string;
  headers: Record<string, string | string[] | number | undefined>;
  /** The port serves HTTPS (the sandbox's `network.httpsPorts`): TLS to it, its certificate unchecked. */
  tls?: boolean;
  /** SNI for a TLS upstream: the host name the sandbox is asked for, when it is a name. */
  servername?: string;
}

/** The keep-alive pools of upstream HTTP/1.1 connections, plain and TLS. */
export interface Agents {
  plain: Agent;
  tls: TlsAgent;
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

/** The same per-sandbox pools for ports that serve HTTPS. */
class SandboxTlsAgent extends TlsAgent {
  override getName(options: Parameters<TlsAgent["getName"]>[0] & { sandboxID?: string }): string {
    return `${super.getName(options)}:${options?.sandboxID ?? ""}`;
  }
}

/** Keep-alive agents for sandbox ports (sockets idle past the limit are closed). */
export function createAgents(limits: ProxyLimits): Agents {
  const o = { keepAlive: true, noDelay: true, maxSockets: limits.maxPerSandbox, maxFreeSockets: 32, timeout: limits.idleTimeoutMs, scheduling: "lifo" as const };
  return { plain: new SandboxAgent(o), tls: new SandboxTlsAgent(o) };
}

/**
 * Closes the idle pooled connections of sandboxes `routed` says are gone (each pool's name ends
 * with its sandbox ID); one carrying a request is closed by a later sweep, once idle.
 */
export function sweepAgents(agents: Agents, routed: (sandboxID: string) => boolean): void {
  for (const agent of [agents.plain, agents.tls]) {
    for (const [name, sockets] of Object.entries(agent.freeSockets)) {
      if (routed(name.slice(name.lastIndexOf(":") + 1))) continue;
      for (const s of sockets ?? []) s.destroy();
    }
  }
}

/** Arms a connect timeout on a fresh socket: a port that never answers counts as not open. */
export function connectTimeout(socket: Socket, ms: number): void {
  if (!socket.connecting) return;
  const timer = setTimeout(() => socket.destroy(timeoutError("connect")), ms);
  socket.once("connect", () => clearTimeout(timer));
  socket.once("close", () => clearTimeout(timer));
}

/**
 * The upstream request for `up`, over TLS when the port serves HTTPS. The sandbox's certificate
 * is not checked (E2B's contract: self-signed ones work); the client's side is still our TLS.
 */
export function upstreamRequest(method: string | undefined, up: Upstream, agent: Agent | TlsAgent | false): ClientRequest {
  const base = { host: up.ip, port: up.port, method, path: up.path, headers: up.headers, agent, setHost: false, sandboxID: up.sandboxID };
  if (!up.tls) return request(base as RequestOptions);
  return tlsRequest({ ...base, rejectUnauthorized: false, ...(up.servername ? { servername: up.servername } : {}) } as RequestOptions);
}

/**
 * Forwards one request over HTTP/1.1, streaming both bodies through pipes (backpressure, no
 * buffering) and carrying trailers; `done` runs once when either side is finished or gone. An
 * answer that cannot be relayed (a status outside 200–599, a 101 nobody asked for, a 1xx flood,
 * bad or oversized headers) gets a 502 on this request alone; a body that breaks after the head
 * went out cuts the client's answer.
 */
export function forwardHttp1(req: AnyRequest, res: AnyResponse, up: Upstream, agents: Agents, limits: ProxyLimits, done: (status: number | ProxyError) => void): void {
  let settled = false;
  // Set once the whole answer is handed to the client; a close before that is the client leaving.
  let answered = false;
  // Set once the upstream's head came (relayed or refused).
  let responded = false;
  let informational = 0;
  const finish = (what: number | ProxyError) => {
    if (settled) return;
    settled = true;
    done(what);
  };
  // A request with no body can be sent again: once, when a kept-alive socket it was given turns
  // out to be closed by the sandbox's server (reset or broken pipe before any answer), as Node's
  // documentation advises; otherwise such a race would read as "port is not open".
  const replayable = (req.method === "GET" || req.method === "HEAD" || req.method === "OPTIONS") && !req.headers["transfer-encoding"] && (req.headers["content-length"] ?? "0") === "0";
  let upReq: ClientRequest;
  /** The upstream's answer is unusable: 502 if the client's answer has not begun, else cut it. */
  const fail = (err?: unknown) => {
    upReq.destroy();
    if (answered) return;
    answered = true;
    if (!res.headersSent) {
      const e = err !== undefined && !responded && isDialFailure(err) ? portNotOpen(up.sandboxID, up.port) : badGateway(up.sandboxID, up.port);
      sendError(req, res, e);
      finish(e);
    } else {
      cutResponse(res);
      finish(res.statusCode);
    }
  };
  const open = (isRetry: boolean): ClientRequest => {
    const r = upstreamRequest(req.method, up, up.tls ? agents.tls : agents.plain);
    /** A handler of this attempt's events: nothing once a retry replaced it. */
    const mine = <A extends unknown[]>(fn: (...a: A) => void) => guarded(fail, (...a: A) => {
      if (r === upReq) fn(...a);
    });
    r.on("socket", (s) => connectTimeout(s, limits.connectTimeoutMs));
    r.on("error", mine((err: Error) => {
      const code = (err as NodeJS.ErrnoException).code;
      if (!isRetry && replayable && !responded && r.reusedSocket && (code === "ECONNRESET" || code === "EPIPE")) {
        upReq = open(true);
        upReq.end();
        return;
      }
      fail(err);
    }));
    r.on("information", mine(() => {
      if (++informational > MAX_INFORMATIONAL) fail();
    }));
    // A 101 to a request that asked for no upgrade: Node hands over the socket; it is not HTTP any more.
    r.on("upgrade", mine((_res: IncomingMessage, socket: Socket) => {
      responded = true;
      socket.destroy();
      fail();
    }));
    // The connection went away with no answer and no error (e.g. after an unasked-for 101).
    r.on("close", mine(() => {
      if (!responded && !answered) fail();
    }));
    r.on("response", mine((upRes: IncomingMessage) => {
      responded = true;
      upRes.on("error", guarded(fail, () => fail()));
      if (!startAnswer(res, upRes.statusCode, upRes.headers)) {
        upRes.destroy();
        return fail();
      }
      upRes.pipe(res as NodeJS.WritableStream, { end: false });
      upRes.on("end", guarded(fail, () => {
        const trailers = relayableTrailers(upRes.trailers);
        if (Object.keys(trailers).length > 0) res.addTrailers(trailers as Record<string, string>);
        answered = true;
        res.end();
        finish(upRes.statusCode ?? 502);
      }));
      // A body cut short (reset, closed before its length) is the upstream's failure, not an end.
      upRes.on("close", guarded(fail, () => {
        if (!upRes.complete && !answered) fail();
      }));
    }));
    return r;
  };
  upReq = open(false);
  // A client that goes away mid-request or mid-answer takes the upstream request with it.
  res.on("close", () => {
    if (!answered) upReq.destroy();
    finish(res.statusCode);
  });
  req.on("error", () => upReq.destroy());
  (req as NodeJS.ReadableStream).pipe(upReq);
}

import type { IncomingMessage } from "node:http";
import { isIP } from "node:net";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { Duplex } from "node:stream";
import type { Logger } from "../log.js";
import { DEFAULT_LIMITS, type ProxyLimits } from "./dial.js";
import type { AnyRequest, AnyResponse } from "../server/request.js";
import { badGateway, badRequestTarget, sandboxNotFound, sendError, tooManyConnections, type ProxyError } from "./errors.js";
import { originForm, refusal } from "./guard.js";
import { hostName } from "../server/host.js";
import { requestHeaders, upstreamHost } from "./headers.js";
import { createAgents, forwardHttp1, sweepAgents, type Upstream } from "./http1.js";
import { forwardHttp2, H2cPool, type H2Timing } from "./http2.js";
import { ClientConnections } from "./clients.js";
import { InFlight } from "./limits.js";
import type { Route, RouteIndex, RouteTarget } from "./target.js";
import { forwardUpgrade, writeRawError } from "./upgrade.js";

/** The sandbox proxy: relays requests and upgrades already routed to `<port>-<id>` to the sandbox. */
export interface Proxy {
  handle(req: AnyRequest, res: AnyResponse, route: Route): void;
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, route: Route): void;
  /**
   * Closes the pooled upstream connections of sandboxes the index no longer routes (a killed
   * sandbox's), and the client connections that carried only their traffic; runs by itself every
   * SWEEP_EVERY_MS.
   */
  sweep(): void;
  /** Client connections tracked now, and the sandboxes they carried traffic for. */
  clients(): { sandboxes: number; connections: number };
  /** Drops pooled upstream connections (requests in flight are cut). */
  close(): void;
}

/** How often the pools are swept of killed sandboxes' connections (else they wait for the idle timeout). */
const SWEEP_EVERY_MS = 5_000;

/**
 * Builds the proxy over the lifecycle's index; only `index.lookup` is read per request. `wake`
 * resumes a paused sandbox whose index entry says traffic resumes it (true once it runs): its
 * requests wait for that, then go on as any other.
 */
export function createProxy(opts: {
  index: RouteIndex;
  log: Logger;
  limits?: Partial<ProxyLimits>;
  wake?: (sandboxID: string) => Promise<boolean>;
  /** Whether a sandbox the index does not route still exists (paused): its clients' connections are kept for its resume. Default: routed. */
  exists?: (sandboxID: string) => boolean;
}): Proxy {
  const limits = { ...DEFAULT_LIMITS, ...opts.limits };
  const { index, log } = opts;
  const agents = createAgents(limits);
  const pool = new H2cPool(limits);
  const inFlight = new InFlight(limits.maxPerSandbox);
  const clients = new ClientConnections();
  const routed = (id: string) => index.lookup(id) !== undefined;
  const sweep = () => {
    sweepAgents(agents, routed);
    pool.sweep(routed);
    // a client keeps its connection to a paused sandbox's host and sends on it after a resume: a
    // GOAWAY then would fail the request the client is sending, so only a sandbox that is gone loses them
    clients.sweep((id) => routed(id) || (opts.exists?.(id) ?? false));
  };
  const sweeper = setInterval(sweep, SWEEP_EVERY_MS);
  sweeper.unref();

  /** The target and the upstream request, or the error to answer with. */
  const admit = (req: AnyRequest, route: Route): { target: RouteTarget; up: Upstream; release: () => void } | ProxyError => {
    const target = index.lookup(route.sandboxID);
    if (!target || target.state !== "running") return sandboxNotFound(route.sandboxID);
    const path = originForm(req.url);
    if (path === undefined) return badRequestTarget(route.sandboxID);
    const refused = refusal(target, route.port, path, req.headers);
    if (refused) return refused;
    const release = inFlight.acquire(target.sandboxID);
    if (!release) return tooManyConnections(target.sandboxID);
    clients.note(req, target.sandboxID);
    const clientHost = String(req.headers[":authority"] ?? req.headers.host ?? "");
    const host = upstreamHost(clientHost, target, route.port);
    const headers = requestHeaders(req.headers, clientHost, req.socket?.remoteAddress);
    if (req.httpVersionMajor === 2) headers[":authority"] = host;
    else headers["host"] = host;
    const up: Upstream = { sandboxID: target.sandboxID, ip: target.ip, port: route.port, path, headers };
    if (route.port !== target.envdPort && target.httpsPorts?.includes(route.port)) {
      up.tls = true;
      const name = hostName(host);
      if (name !== "" && isIP(name) === 0) up.servername = name;
    }
    return { target, up, release };
  };

  /**
   * Runs `go` once the route's sandbox is resumed when traffic resumes it (else `go` now); `fail`
   * with a 502 when it cannot be. A request the sandbox would refuse anyway (an internal envd
   * path, a missing or wrong traffic token) is refused without resuming it.
   */
  const whenAwake = (req: AnyRequest, route: Route, go: () => void, fail: (e: ProxyError) => void): void => {
    const t = index.lookup(route.sandboxID);
    if (!t || t.state !== "paused" || !t.autoResume || !opts.wake) return go();
    const path = originForm(req.url);
    const refused = path === undefined ? badRequestTarget(route.sandboxID) : refusal(t, route.port, path, req.headers);
    if (refused) return fail(refused);
    opts.wake(route.sandboxID)
      .then(
        (running) => (running ? go() : fail(sandboxNotFound(route.sandboxID))),
        (err: unknown) => {
          log.warn({ sandboxID: route.sandboxID, err: (err as Error).message }, "resuming a sandbox for its traffic failed");
          fail(sandboxNotFound(route.sandboxID));
        },
      )
      // Past the wait, the request goes on outside the dispatcher's guard: a throw fails it alone.
      .catch((err: unknown) => {
        log.error({ sandboxID: route.sandboxID, err: String((err as Error)?.message ?? err) }, "relaying a request after resuming its sandbox failed");
        fail(badGateway(route.sandboxID, route.port));
      });
  };

  const logDone = (req: AnyRequest, route: Route, t0: number) => (what: number | ProxyError, timing?: H2Timing) => {
    const status = typeof what === "number" ? what : what.status;
    log.debug({ sandboxID: route.sandboxID, port: route.port, method: req.method, status, ms: Math.round((performance.now() - t0) * 10) / 10, h2: req.httpVersionMajor === 2, ...timing }, "proxied");
  };

  const handle = (req: AnyRequest, res: AnyResponse, route: Route): void => {
    const t0 = performance.now();
    const admitted = admit(req, route);
    if ("status" in admitted) {
      sendError(req, res, admitted);
      logDone(req, route, t0)(admitted);
      return;
    }
    const { target, up, release } = admitted;
    const done = (what: number | ProxyError, timing?: H2Timing) => {
      release();
      logDone(req, route, t0)(what, timing);
    };
    // envd and gRPC speak h2c; other ports may be plain HTTP/1.1 servers, which every server speaks.
    const grpc = String(req.headers["content-type"] ?? "").startsWith("application/grpc");
    if (req.httpVersionMajor === 2 && (route.port === target.envdPort || grpc)) {
      forwardHttp2(req as Http2ServerRequest, res as Http2ServerResponse, up, pool, done);
    } else {
      if (req.httpVersionMajor === 2) {
        up.headers["host"] = up.headers[":authority"];
        delete up.headers[":authority"];
      }
      forwardHttp1(req, res, up, agents, limits, done);
    }
  };

  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer, route: Route): void => {
    const t0 = performance.now();
    const admitted = admit(req, route);
    if ("status" in admitted) {
      writeRawError(req, socket, admitted);
      logDone(req, route, t0)(admitted);
      return;
    }
    const { up, release } = admitted;
    up.headers["connection"] = "Upgrade";
    if (req.headers.upgrade) up.headers["upgrade"] = req.headers.upgrade;
    forwardUpgrade(req, socket, head, up, limits, () => {
      release();
      logDone(req, route, t0)(101);
    });
  };

  return {
    handle: (req, res, route) => whenAwake(req, route, () => handle(req, res, route), (e) => sendError(req, res, e)),
    upgrade: (req, socket, head, route) =>
      whenAwake(req, route, () => upgrade(req, socket, head, route), (e) => {
        if (!socket.destroyed) writeRawError(req, socket, e);
      }),

    sweep,
    clients: () => clients.size(),

    close() {
      clearInterval(sweeper);
      agents.plain.destroy();
      agents.tls.destroy();
      pool.close();
    },
  };
}

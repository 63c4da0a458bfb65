import { createHash } from "node:crypto";
import type { Deps } from "../deps.js";
import { hostTokenHash } from "../config.js";
import type { Route, RouteRequest } from "../http/routes.js";
import { BadInitBody, parseInitBody, type InitBody } from "./init-body.js";
import { needsStep, type Clock } from "./clock.js";
import type { CaInstaller } from "./ca.js";
import { pointEventsHost } from "./hosts.js";
import { readBody } from "./read-body.js";

const sha512 = (s: string) => createHash("sha512").update(s, "utf8").digest("hex");
const MAX_INIT_BODY = 4 * 1024 * 1024;

/** Collaborators /init needs besides Deps. */
export interface InitParts {
  clock: Clock;
  ca: CaInstaller;
  version: string;
}

type Verdict = "ok" | "reset-not-authorized" | "mismatch";

/** The /init token authorisation rules of envd-behaviour §4.4 step 4 (host hash from config instead of MMDS). */
export function authorizeInit(deps: Deps, requestToken: string | undefined): Verdict {
  const { token } = deps.state;
  if (requestToken !== undefined && token.equals(requestToken)) return "ok";
  const hash = hostTokenHash(deps.config);
  if (hash) {
    if (requestToken !== undefined && sha512(requestToken) === hash) return "ok";
    if (requestToken === undefined && hash === sha512("")) return "ok";
  }
  if (!token.isSet && !hash) return "ok";
  return requestToken === undefined ? "reset-not-authorized" : "mismatch";
}

/** POST /init: authorise, then apply clock, env vars, token, hosts, defaults and CA in order. */
export function initRoute(deps: Deps, parts: InitParts): Route {
  let lock: Promise<void> = Promise.resolve();
  const handler = async ({ req, res, log }: RouteRequest) => {
    res.setHeader("X-Envd-Version", parts.version);
    let body: InitBody;
    try {
      body = parseInitBody(await readBody(req, MAX_INIT_BODY));
    } catch (err) {
      log.info({ reason: err instanceof BadInitBody ? err.message : "unreadable body" }, "init refused");
      res.statusCode = 400;
      res.end();
      return;
    }
    const prev = lock;
    let release!: () => void;
    lock = new Promise((r) => (release = r));
    await prev;
    try {
      await apply(deps, parts, body, res, log);
    } finally {
      release();
    }
  };
  return { method: "POST", path: "/init", exempt: true, handler };
}

async function apply(deps: Deps, parts: InitParts, body: InitBody, res: RouteRequest["res"], log: RouteRequest["log"]): Promise<void> {
  const verdict = authorizeInit(deps, body.accessToken);
  if (verdict !== "ok") {
    res.statusCode = 401;
    res.end(verdict === "reset-not-authorized" ? "access token reset not authorized" : "access token validation failed");
    return;
  }
  const { state } = deps;
  const stale = body.timestampNs !== undefined && body.timestampNs < state.lastInitNs;
  if (!stale) {
    if (body.timestampNs !== undefined) {
      state.lastInitNs = body.timestampNs;
      if (needsStep(parts.clock.nowNs(), body.timestampNs)) {
        await parts.clock.set(body.timestampNs).catch((err) => log.warn({ err: String(err) }, "clock step failed"));
      }
    }
    if (body.envVars) state.envs.replaceUser(body.envVars);
    state.token.set(body.accessToken);
    if (body.hyperloopIP) {
      const ip = body.hyperloopIP;
      pointEventsHost(deps.config.hostsFile, ip)
        .then((ok) => (ok ? state.envs.setInternal("E2B_EVENTS_ADDRESS", `http://${ip}`) : log.warn("invalid hyperloopIP")))
        .catch((err) => log.warn({ err: String(err) }, "hosts rewrite failed"));
    }
    if (body.defaultUser) state.defaultUser = body.defaultUser;
    if (body.defaultWorkdir) state.defaultWorkdir = body.defaultWorkdir;
    if (body.caBundle && body.caBundle.trim()) {
      try {
        await parts.ca.install(body.caBundle);
      } catch (err) {
        res.statusCode = 400;
        res.end(`failed to install CA bundle: ${(err as Error).message}`);
        return;
      }
    }
    if (body.volumeMounts && body.volumeMounts.length > 0) {
      res.statusCode = 400;
      res.end("failed to setup NFS volumes: NFS volume mounts are not supported by this envd");
      return;
    }
  }
  res.statusCode = 204;
  res.setHeader("Cache-Control", "no-store");
  res.end();
}

// POST /init: the host hands the sandbox its token, time, environment, user, workdir and CA.
import { crypto } from "../platform/crypto.js";
import type { Deps } from "../deps.js";
import { hostTokenHash } from "../config.js";
import type { Route, RouteRequest } from "../http/routes.js";
import { BadInitBody, parseInitBody, type InitBody } from "./init-body.js";
import { needsStep, type Clock } from "./clock.js";
import type { CaInstaller } from "./ca.js";
import { pointEventsHost } from "./hosts.js";
import { BodySlots, readBody, type BodyLimits } from "./read-body.js";
import { HttpError } from "../http/errors.js";
import type { TokenHashStore } from "./token-store.js";
import { safeEqual } from "../auth/token.js";

const sha512 = (s: string) => crypto().createHash("sha512").update(s, "utf8").digest("hex");

/**
 * Bounds of an /init body, which is read before its sender is known. 1 MiB: its bulk are
 * envVars, which end up in the environment of every process, where the kernel allows argv and
 * envp together 2 MiB at most (and 128 KiB per variable); a CA PEM is ~2 KiB, volumeMounts a
 * few hundred bytes. 5 s: the host sends it over a local link in milliseconds.
 */
export const INIT_BODY_LIMITS: BodyLimits = { maxBytes: 1024 * 1024, timeoutMs: 5000 };
/** At most this many /init bodies are read at once (8 MiB in all); more are answered 429 at once. */
export const INIT_BODY_SLOTS = 8;

/**
 * Loads and runs once what an /init that sets an access token needs (node:crypto's SHA-512 and
 * constant-time comparison), so that a daemon started ahead of its /init (a warm pool's) does not
 * load it while its creator waits: ~10 ms of CPU, ~0.3 MiB.
 */
export function prepareTokenChecks(): void {
  sha512("");
  safeEqual("", "");
}

/** Collaborators /init needs besides Deps. */
export interface InitParts {
  clock: Clock;
  ca: CaInstaller;
  version: string;
  /** Where the hash of the token is kept across restarts of the daemon. */
  tokens: TokenHashStore;
}

type Verdict = "ok" | "reset-not-authorized" | "mismatch";

/** The /init token authorisation rules of envd-behaviour §4.4 step 4 (host hash from config instead of MMDS). */
export function authorizeInit(deps: Deps, requestToken: string | undefined): Verdict {
  const { token, priorTokenHash, priorTokenUnknown } = deps.state;
  if (requestToken !== undefined && token.equals(requestToken)) return "ok";
  // After a restart the token is known only by its hash: presenting it again is a re-init.
  if (requestToken !== undefined && priorTokenHash !== undefined && safeEqual(sha512(requestToken), priorTokenHash)) return "ok";
  const hash = hostTokenHash(deps.config);
  if (hash) {
    if (requestToken !== undefined && sha512(requestToken) === hash) return "ok";
    if (requestToken === undefined && hash === sha512("")) return "ok";
  }
  if (!token.isSet && !hash && priorTokenHash === undefined && !priorTokenUnknown) return "ok";
  return requestToken === undefined ? "reset-not-authorized" : "mismatch";
}

/** POST /init: authorise, then apply clock, env vars, token, hosts, defaults and CA in order. */
export function initRoute(deps: Deps, parts: InitParts): Route {
  let lock: Promise<void> = Promise.resolve();
  const slots = new BodySlots(INIT_BODY_SLOTS);
  const handler = async ({ req, res, log }: RouteRequest) => {
    res.setHeader("X-Envd-Version", parts.version);
    const slot = slots.take();
    if (!slot) {
      log.info({ slots: slots.max }, "init refused: too many /init bodies in flight");
      res.statusCode = 429;
      res.setHeader("Retry-After", "1");
      res.end("too many /init requests in flight");
      return;
    }
    try {
      let body: InitBody;
      try {
        body = parseInitBody(await readBody(req, INIT_BODY_LIMITS));
      } catch (err) {
        const status = err instanceof HttpError && err.status !== 400 ? err.status : 400;
        log.info({ reason: err instanceof BadInitBody || err instanceof HttpError ? err.message : "unreadable body" }, "init refused");
        res.statusCode = status;
        res.end();
        return;
      }
      // The slot is held until the body is applied, so parsed bodies waiting here are bounded too.
      const prev = lock;
      let release!: () => void;
      lock = new Promise((r) => (release = r));
      await prev;
      try {
        await apply(deps, parts, body, res, log);
      } finally {
        release();
      }
    } finally {
      slot();
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
    const saved = await parts.tokens.save(body.accessToken === undefined ? undefined : sha512(body.accessToken)).then(
      () => true,
      (err: NodeJS.ErrnoException) => (log.error({ code: err.code ?? "error" }, "cannot record the access token hash"), false),
    );
    state.token.set(body.accessToken);
    if (!saved) {
      // The token in memory governs the gate now; the host learns that a restart would not know it.
      state.closedUntilInit = false;
      res.statusCode = 500;
      res.end("failed to record the access token state for restarts of envd");
      return;
    }
    state.priorTokenHash = undefined;
    state.priorTokenUnknown = false;
    state.closedUntilInit = false;
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

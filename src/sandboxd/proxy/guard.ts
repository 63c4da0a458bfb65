import { createHash, timingSafeEqual } from "node:crypto";
import { internalRoute, trafficTokenInvalid, trafficTokenMissing, type ProxyError } from "./errors.js";
import type { RouteTarget } from "./target.js";

/**
 * envd routes only the control plane calls (the SDK never does): `/init` sets the access token
 * and environment, the rest freeze, snapshot, upgrade or sample the sandbox.
 */
const INTERNAL_PATHS = new Set(["/init", "/freeze", "/unfreeze", "/collapse", "/fsfreeze", "/fsthaw", "/upgrade", "/metrics"]);

/**
 * The path as a router would see it: query cut, percent-decoding, duplicate slashes, dot
 * segments and a trailing slash removed, lower-cased, so no spelling of an internal path slips by.
 * An undecodable path counts as internal (refused).
 */
export function normalizePath(rawPath: string): string | undefined {
  let p = rawPath.split(/[?#]/, 1)[0];
  try {
    for (let i = 0; i < 3 && p.includes("%"); i++) p = decodeURIComponent(p);
  } catch {
    return undefined;
  }
  const out: string[] = [];
  for (const seg of p.replace(/\\/g, "/").split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  return ("/" + out.join("/")).toLowerCase();
}

/**
 * The request target in origin form (`/path?query`): an absolute-form target (`http://h/init`)
 * is cut to its path, since a server behind us would route on that path; anything else (`*`,
 * authority form, garbage) is undefined and refused.
 */
export function originForm(target: string | undefined): string | undefined {
  if (!target) return undefined;
  if (target.startsWith("/")) return target;
  if (!/^https?:\/\//i.test(target)) return undefined;
  try {
    const u = new URL(target);
    return u.pathname + u.search;
  } catch {
    return undefined;
  }
}

/** Whether a path names one of envd's internal routes (or something under one). */
export function isInternalPath(rawPath: string): boolean {
  const p = normalizePath(rawPath);
  if (p === undefined) return true;
  for (const internal of INTERNAL_PATHS) if (p === internal || p.startsWith(internal + "/")) return true;
  return false;
}

/** Constant-time equality of two secrets of any lengths (compared as SHA-256 digests). */
export function sameSecret(a: string, b: string): boolean {
  const da = createHash("sha256").update(a).digest();
  const db = createHash("sha256").update(b).digest();
  return timingSafeEqual(da, db);
}

/** The reason to refuse a request to a running sandbox before dialing it, if any. */
export function refusal(target: RouteTarget, port: number, path: string, headers: Record<string, string | string[] | undefined>): ProxyError | undefined {
  if (port === target.envdPort) {
    return isInternalPath(path) ? internalRoute(target.sandboxID) : undefined;
  }
  if (target.trafficAccessToken === undefined || target.trafficAccessToken === "") return undefined;
  const given = headers["e2b-traffic-access-token"];
  if (given === undefined) return trafficTokenMissing(target.sandboxID);
  const token = Array.isArray(given) ? given[0] : given;
  return sameSecret(token, target.trafficAccessToken) ? undefined : trafficTokenInvalid(target.sandboxID);
}

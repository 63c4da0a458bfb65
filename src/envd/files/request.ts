import { ConnectError } from "@connectrpc/connect";
import { validateSigning, type SignedBy } from "../auth/signature.js";
import { expandAndResolve } from "../auth/paths.js";
import { queryUser } from "../auth/identity.js";
import type { User } from "../auth/users.js";
import type { Deps } from "../deps.js";
import { HttpError, httpStatusOf } from "../http/errors.js";
import type { RouteRequest } from "../http/routes.js";

/** A single-valued query parameter; a repeated one is a 400 as the reference's binder answers. */
export function queryParam(query: URLSearchParams, name: string): string | undefined {
  const all = query.getAll(name);
  if (all.length > 1) throw new HttpError(400, `Invalid format for parameter ${name}: multiple values given`);
  return all[0];
}

/** The first value of a request header (Node joins repeats of unknown headers with ", "). */
export function headerValue(r: RouteRequest, name: string): string | undefined {
  const v = r.req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The user of a /files request and how the request was authorised. */
export interface FilesAccess {
  user: User;
  signedBy: SignedBy;
}

/**
 * Authorises GET/POST /files (envd-behaviour §3.4) and returns the request user: header token or
 * signed URL over the raw `path` and `username` query values, then the user lookup (401 when unknown).
 */
export function authorizeFiles(r: RouteRequest, deps: Deps, operation: "read" | "write"): FilesAccess {
  const path = queryParam(r.query, "path");
  const username = queryParam(r.query, "username");
  const signature = queryParam(r.query, "signature");
  const expiration = queryParam(r.query, "signature_expiration");
  if (expiration !== undefined && !/^-?\d+$/.test(expiration)) {
    throw new HttpError(400, `Invalid format for parameter signature_expiration: not an integer: ${JSON.stringify(expiration)}`);
  }
  const signedBy = validateSigning(deps.state.token, {
    headerToken: headerValue(r, "x-access-token"),
    path: path ?? "",
    username: username ?? "",
    signature,
    expiration,
    operation,
    nowSeconds: Math.floor(Date.now() / 1000),
  });
  return { user: queryUser(username ?? null, deps), signedBy };
}

/** Resolves a request path for a user; resolution errors become 400 with the route's message prefix. */
export function resolvePath(raw: string, user: User, deps: Deps, prefix: string): string {
  try {
    return expandAndResolve(raw, user, deps.state.defaultWorkdir);
  } catch (err) {
    if (err instanceof ConnectError) throw new HttpError(httpStatusOf(err.code), `${prefix}${err.rawMessage}`, { cause: err });
    throw err;
  }
}

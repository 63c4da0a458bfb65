import { Code, ConnectError, createContextKey, type HandlerContext } from "@connectrpc/connect";
import { HttpError } from "../http/errors.js";
import type { Deps } from "../deps.js";
import type { User } from "./users.js";

/** The user named by a request's Basic auth header, set once per RPC by the identity interceptor. */
export const userKey = createContextKey<User | undefined>(undefined, { description: "envd request user" });

/** Extracts the username from `Authorization: Basic base64(user:password)`; undefined when absent or unparseable. */
export function basicUsername(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (!m) return undefined;
  const decoded = Buffer.from(m[1], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0) return undefined;
  return decoded.slice(0, colon);
}

/** Resolves the Basic-auth user of an RPC; unknown → unauthenticated "invalid username: '<name>'". */
export function userFromBasic(header: string | undefined, deps: Deps): User | undefined {
  const name = basicUsername(header);
  if (name === undefined) return undefined;
  const user = deps.users.lookup(name);
  if (!user) throw new ConnectError(`invalid username: '${name}'`, Code.Unauthenticated);
  return user;
}

/** The user of an RPC: the Basic-auth user, else the default user (unauthenticated when neither resolves). */
export function requestUser(ctx: HandlerContext, deps: Deps): User {
  return userOrDefault(ctx.values.get(userKey), deps);
}

/** `user` (the Basic-auth user of a call), else the default user (unauthenticated when neither resolves). */
export function userOrDefault(user: User | undefined, deps: Deps): User {
  if (user) return user;
  const name = deps.state.defaultUser;
  if (!name) throw new ConnectError("no user specified", Code.Unauthenticated);
  const fallback = deps.users.lookup(name);
  if (!fallback) throw new ConnectError(`invalid default user: '${name}'`, Code.Unauthenticated);
  return fallback;
}

/** The user of a plain route from its `username` query value (null = default user); unknown → 401. */
export function queryUser(username: string | null, deps: Deps): User {
  const name = username ?? deps.state.defaultUser;
  const user = deps.users.lookup(name);
  if (!user) throw new HttpError(401, `error looking up user '${name}': user: unknown user ${name}`);
  return user;
}

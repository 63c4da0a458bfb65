import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";
import { userFromBasic, userKey } from "../auth/identity.js";
import type { Deps } from "../deps.js";

/** Per-request facts the access log line reports; filled in as the request runs. */
export interface RequestRecord {
  procedure?: string;
  code?: string;
}

/** Carries the request's log record into RPC handlers and interceptors. */
export const recordKey = createContextKey<RequestRecord | undefined>(undefined, { description: "envd request record" });

/** Resolves the Basic-auth user once per RPC and stores it under userKey. */
export function identityInterceptor(deps: Deps): Interceptor {
  return (next) => async (req) => {
    const user = userFromBasic(req.header.get("authorization") ?? undefined, deps);
    if (user) req.contextValues.set(userKey, user);
    return next(req);
  };
}

/** The Connect wire name of an error's code, e.g. "not_found". */
export function codeName(err: unknown): string {
  return Code[ConnectError.from(err).code].replace(/[A-Z]/g, (c, i: number) => (i ? "_" : "") + c.toLowerCase());
}

/** Records the procedure and the final Connect code (unary and streaming) for the access log. */
export function recordInterceptor(): Interceptor {
  return (next) => async (req) => {
    const rec = req.contextValues.get(recordKey);
    if (rec) rec.procedure = req.url.slice(req.url.lastIndexOf("/", req.url.lastIndexOf("/") - 1));
    try {
      const res = await next(req);
      if (!rec || !res.stream) return res;
      const inner = res.message;
      return {
        ...res,
        message: (async function* () {
          try {
            yield* inner;
          } catch (err) {
            rec.code = codeName(err);
            throw err;
          }
        })(),
      };
    } catch (err) {
      if (rec) rec.code = codeName(err);
      throw err;
    }
  };
}

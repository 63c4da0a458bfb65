import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { HttpError, writeError, type AnyResponse } from "./errors.js";
import type { Logger } from "./log.js";

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

/** Where relative request targets are resolved; only the path and query of the result are used. */
const BASE = "http://envd";

/** Why a request's target or authority was refused: answered 400 on that request only. */
export class BadRequestTarget extends HttpError {
  constructor(message: string) {
    super(400, message);
  }
}

/**
 * The request target as a URL (origin-form resolved against a fixed base, as routing always
 * did). A target the URL parser rejects (`//a:99999/`, `//[`, `//%zz/`, `http://a:99999/`)
 * throws BadRequestTarget instead of the parser's TypeError.
 */
export function parseTarget(target: string | undefined): URL {
  const url = URL.parse(target ?? "/", BASE);
  if (!url) throw new BadRequestTarget("malformed request target");
  return url;
}

/**
 * Refuses a request whose Host (or :authority) does not make a URL with its target: connect-node
 * builds one from both for every call it serves and throws on its own when it cannot.
 */
export function checkAuthority(req: Req): void {
  const authority = "authority" in req && req.authority ? req.authority : req.headers.host;
  if (!authority || !URL.canParse(req.url ?? "/", `http://${authority}`)) throw new BadRequestTarget("missing or malformed Host header");
}

/**
 * Runs one request's synchronous handling so that nothing it throws leaves the request
 * listener (where it would end the process): the error is logged (path without query, error
 * name and code; never headers or bodies) and only this request is answered, 400 for a bad
 * target, else 500, or cut when its answer has begun.
 */
export function guarded(req: Req, res: Res, log: Logger, run: () => void): void {
  try {
    run();
  } catch (err) {
    answerFailure(req, res, log, err);
  }
}

/** The last-resort answer for a request whose handling threw. */
export function answerFailure(req: Req, res: Res, log: Logger, err: unknown): void {
  const bad = err instanceof BadRequestTarget;
  const e = err as { name?: string; code?: string } | undefined;
  const path = (req.url ?? "").split("?", 1)[0].slice(0, 200);
  if (bad) log.info({ method: req.method, path, reason: (err as Error).message }, "request refused");
  else log.error({ method: req.method, path, err: e?.name ?? typeof err, code: e?.code }, "request handler failed");
  try {
    if (res.headersSent || res.destroyed) res.destroy();
    else writeError(res as AnyResponse, bad ? err : new HttpError(500, "envd failed to handle the request"));
  } catch {
    res.destroy();
  }
}

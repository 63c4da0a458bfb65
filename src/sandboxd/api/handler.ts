import type { Logger } from "../log.js";
import type { AnyRequest, AnyResponse } from "../server/request.js";
import type { ApiHandler } from "../server/dispatch.js";
import { DomainError, Invalid, Unauthenticated } from "../errors.js";
import type { Metrics } from "../metrics/service.js";
import type { Caller } from "./route.js";
import type { SandboxService } from "../sandboxes/service.js";
import type { TemplateService } from "../templates/service.js";
import type { Store } from "../store/store.js";
import { sendError, sendJson } from "./http.js";
import { match } from "./routes.js";
import { CREDENTIAL_PREFIX } from "../store/api-keys.js";
import { shortId } from "./validate.js";

const INVALID_KEY = "Invalid API key, please visit https://e2b.dev/docs/api-key for more information.";
const INVALID_TOKEN = "Invalid access token: it is unknown or was deleted";

/** A path segment decoded, or a 400 when its escapes are malformed. */
function safeDecode(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new Invalid("validation error: malformed percent-encoding in the path");
  }
}

/**
 * The team of the request's X-API-Key, or of its `Authorization: Bearer` access token (an API key
 * there is accepted too, as before access tokens existed), or the 401 to answer.
 */
function authenticate(store: Store, req: AnyRequest): Caller {
  const raw = req.headers["x-api-key"];
  const header = Array.isArray(raw) ? raw[0] : raw;
  const bearer = /^Bearer\s+(\S+)$/i.exec(String(req.headers.authorization ?? ""))?.[1];
  const key = header || bearer;
  if (key === undefined || key === "") {
    throw new Unauthenticated("Missing API key: send your team's key in the X-API-Key header (see https://e2b.dev/docs/api-key)");
  }
  if (!header && key.startsWith(CREDENTIAL_PREFIX.access_token)) {
    const team = store.apiKeys.teamOfToken(key);
    if (!team) throw new Unauthenticated(INVALID_TOKEN);
    return { teamID: team };
  }
  const team = key.startsWith(CREDENTIAL_PREFIX.api_key) ? store.apiKeys.teamOf(key) : undefined;
  if (!team) throw new Unauthenticated(INVALID_KEY);
  return { teamID: team, apiKey: key };
}

/**
 * The control API: routes by method and path, authenticates by X-API-Key, and answers every
 * error as `{code, message}` JSON. Nothing escapes: an unexpected error is logged and answered
 * with a 500 that names no internals.
 */
export function createApiHandler(opts: { store: Store; sandboxes: SandboxService; templates: TemplateService; log: Logger; metrics?: Metrics }): ApiHandler {
  const { store, sandboxes, templates, log, metrics } = opts;

  const handle = async (req: AnyRequest, res: AnyResponse) => {
    const url = new URL(req.url ?? "/", "http://api");
    const path = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, "") : url.pathname;
    const method = req.method ?? "GET";
    const found = match(method, path);
    if ("methods" in found) {
      req.resume();
      if (found.methods.length > 0) return sendJson(res, 405, { code: 405, message: `Method ${method} is not allowed on ${path}` }, { allow: found.methods.join(", ") });
      return sendJson(res, 404, { code: 404, message: `Not found: ${method} ${path} is not an operation of this API` });
    }
    const caller: Caller = found.route.public ? { teamID: "" } : authenticate(store, req);
    const { teamID } = caller;
    const { raw } = found;
    const isAlias = found.route.param === "alias";
    const id = raw === undefined || isAlias || found.route.param === "raw" ? "" : shortId(raw);
    const params = found.route.param === "raw" ? found.groups.map(safeDecode) : [];
    const alias = raw !== undefined && isAlias ? safeDecode(raw) : "";
    await found.route.handle({ req, res, teamID, caller, id, alias, query: url.searchParams, params, sandboxes, templates, store, metrics });
  };

  return (req, res) => {
    const started = Date.now();
    handle(req, res)
      .catch((err: unknown) => {
        req.resume();
        if (!(err instanceof DomainError)) log.error({ err: String((err as Error)?.stack ?? err), method: req.method }, "API request failed");
        sendError(res, err);
      })
      .catch(() => res.destroy())
      .finally(() => log.debug({ method: req.method, status: res.statusCode, ms: Date.now() - started }, "api request"));
  };
}

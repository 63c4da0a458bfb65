/** The control API's route table: the sandbox routes, composed with every area's table in matching order, and the matcher. */
import type { Route, RouteContext } from "./route.js";
import { METRICS_ROUTES } from "./metrics-routes.js";
import { parseCreateBody, V1_CREATE_DEFAULTS, V2_CREATE_DEFAULTS, type CreateDefaults } from "./create-body.js";
import { readJson, sendEmpty, sendJson } from "./http.js";
import { parseListQuery } from "./list-query.js";
import { LOGS_ROUTES } from "./logs-routes.js";
import { NETWORK_ROUTES } from "./network-routes.js";
import { parseMetadataFilter } from "../sandboxes/list.js";
import { invalid } from "../errors.js";
import { objectBody, onlyKnown, optBool, optInt } from "./validate.js";
import { TEMPLATE_ROUTES } from "./template-routes.js";
import { KEY_ROUTES } from "./key-routes.js";
import { UNSERVED_ROUTES } from "./unserved-routes.js";
import { SNAPSHOT_ROUTES } from "./snapshot-routes.js";

/** The connect timeout when a client sends none (the SDKs' own default). */
const CONNECT_DEFAULT_TIMEOUT_S = 300;

const create = (defaults: CreateDefaults) => async (c: RouteContext) => sendJson(c.res, 201, await c.sandboxes.create(c.teamID, parseCreateBody(await readJson(c.req), defaults)));

/**
 * The body of connect and resume. `memory: false` (the SDK's onResume 'reboot') cold-boots a
 * paused sandbox from its disk alone, a frozen one too (its memory is dropped).
 */
function resumeBody(raw: unknown, fields: readonly string[]): Record<string, unknown> {
  const body = objectBody(raw, true);
  onlyKnown(body, fields, "");
  optBool(body, "memory");
  return body;
}

const connect = async (c: RouteContext) => {
  const body = resumeBody(await readJson(c.req), ["timeout", "memory"]);
  const timeout = optInt(body, "timeout") ?? CONNECT_DEFAULT_TIMEOUT_S;
  if (timeout < 0) throw invalid(`field "timeout": number must be at least 0`);
  const r = await c.sandboxes.connect(c.teamID, c.id, timeout, optBool(body, "memory"));
  sendJson(c.res, r.status, r.body);
};

const ID = "([^/]+)";

/** The control API's routes. */
export const ROUTES: Route[] = [
  ...METRICS_ROUTES,
  ...SNAPSHOT_ROUTES,
  ...TEMPLATE_ROUTES,
  { method: "POST", path: /^\/sandboxes$/, handle: create(V1_CREATE_DEFAULTS) },
  { method: "POST", path: /^\/v2\/sandboxes$/, handle: create(V2_CREATE_DEFAULTS) },
  { method: "GET", path: /^\/sandboxes$/, handle: (c) => sendJson(c.res, 200, c.sandboxes.listV1(c.teamID, parseMetadataFilter(c.query.get("metadata")))) },
  {
    method: "GET",
    path: /^\/v2\/sandboxes$/,
    handle(c) {
      const r = c.sandboxes.listV2(c.teamID, parseListQuery(c.query));
      const headers: Record<string, string> = {};
      if (r.nextToken) headers["x-next-token"] = r.nextToken;
      if (r.totalRunning !== undefined) headers["x-total-running"] = String(r.totalRunning);
      sendJson(c.res, 200, r.items, headers);
    },
  },
  { method: "GET", path: new RegExp(`^/sandboxes/${ID}$`), handle: (c) => sendJson(c.res, 200, c.sandboxes.get(c.teamID, c.id)) },
  { method: "DELETE", path: new RegExp(`^/sandboxes/${ID}$`), handle: async (c) => sendEmpty(c.res, (await c.sandboxes.kill(c.teamID, c.id), 204)) },
  { method: "POST", path: new RegExp(`^/sandboxes/${ID}/connect$`), handle: connect },
  { method: "POST", path: new RegExp(`^/v2/sandboxes/${ID}/connect$`), handle: connect },
  {
    method: "POST",
    path: new RegExp(`^/sandboxes/${ID}/resume$`),
    async handle(c) {
      const body = resumeBody(await readJson(c.req), ["timeout", "memory", "autoPause"]);
      sendJson(c.res, 201, await c.sandboxes.resume(c.teamID, c.id, optInt(body, "timeout") ?? 15, optBool(body, "autoPause"), optBool(body, "memory")));
    },
  },
  {
    method: "POST",
    path: new RegExp(`^/sandboxes/${ID}/timeout$`),
    async handle(c) {
      const body = objectBody(await readJson(c.req), false);
      onlyKnown(body, ["timeout"], "");
      const timeout = optInt(body, "timeout");
      if (timeout === undefined) throw invalid(`field "timeout" is required`);
      await c.sandboxes.setTimeout(c.teamID, c.id, timeout);
      sendEmpty(c.res);
    },
  },
  {
    method: "POST",
    path: new RegExp(`^/sandboxes/${ID}/refreshes$`),
    async handle(c) {
      const body = objectBody(await readJson(c.req), true);
      onlyKnown(body, ["duration"], "");
      const duration = optInt(body, "duration") ?? 15;
      if (duration < 0 || duration > 3600) throw invalid(`field "duration": number must be between 0 and 3600`);
      await c.sandboxes.refresh(c.teamID, c.id, duration);
      sendEmpty(c.res);
    },
  },
  {
    method: "POST",
    path: new RegExp(`^/sandboxes/${ID}/pause$`),
    async handle(c) {
      const body = objectBody(await readJson(c.req), true);
      onlyKnown(body, ["memory"], "");
      // memory false: paused to disk (memory and CPU freed; a resume cold-starts it on its disk)
      await c.sandboxes.pause(c.teamID, c.id, optBool(body, "memory") ?? true);
      sendEmpty(c.res);
    },
  },
  ...NETWORK_ROUTES,
  ...LOGS_ROUTES,
  { method: "GET", path: /^\/templates\/aliases\/([^/]+)$/, param: "alias", handle: (c) => sendJson(c.res, 200, c.sandboxes.templateByAlias(c.teamID, c.alias)) },
  ...KEY_ROUTES,
  ...UNSERVED_ROUTES,
];

/** The route for a method and path with the path's raw parameter, or the methods the path has. */
export function match(method: string, path: string): { route: Route; raw: string | undefined; groups: string[] } | { methods: string[] } {
  const methods: string[] = [];
  for (const route of ROUTES) {
    const m = route.path.exec(path);
    if (!m) continue;
    if (route.method !== method) {
      methods.push(route.method);
      continue;
    }
    return { route, raw: m[1], groups: m.slice(1) };
  }
  return { methods };
}

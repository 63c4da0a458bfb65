import { readJson, sendEmpty, sendJson } from "./http.js";
import { parseBuildStart, parseRegistryCredentials, parseDockerfileTemplate, parseNamedTemplate, parseTagAssignment, parseTagRemoval, parseTemplateUpdate } from "./template-body.js";
import type { Route, RouteContext } from "./route.js";
import { DomainError, invalid } from "../errors.js";

const SEG = "([^/]+)";

/** The template ID of a path, checked like E2B's IDs ([a-z0-9], or an alias in [a-z0-9_-]). */
function templateParam(raw: string): string {
  if (!/^[a-z0-9][a-z0-9_-]{0,127}$/i.test(raw)) throw invalid(`invalid template ID '${raw.slice(0, 64)}'`);
  return raw;
}

/** The host the client reached the API at (HTTP/1.1 Host or HTTP/2 :authority), for URLs sandboxd hands out. */
function hostOf(c: RouteContext): string {
  const h = c.req.headers;
  return String(h[":authority"] ?? h.host ?? "api.localhost");
}

/** Paging of GET /v2/templates: `limit` (1..100, default 100) and the `nextToken` offset. */
function pageOf(items: unknown[], q: URLSearchParams): { page: unknown[]; next?: string } {
  const limit = q.has("limit") ? Number(q.get("limit")) : 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw invalid(`"limit" must be an integer from 1 to 100`);
  let offset = 0;
  const token = q.get("nextToken");
  if (token) {
    const m = /^o:(\d+)$/.exec(Buffer.from(token, "base64url").toString("utf8"));
    if (!m) throw invalid(`"nextToken" is not a token this server issued`);
    offset = Number(m[1]);
  }
  const page = items.slice(offset, offset + limit);
  return { page, ...(offset + limit < items.length ? { next: Buffer.from(`o:${offset + limit}`).toString("base64url") } : {}) };
}

/** The control API's template routes (builds, files, tags). */
export const TEMPLATE_ROUTES: Route[] = [
  { method: "GET", path: /^\/templates$/, handle: (c) => sendJson(c.res, 200, c.templates.list(c.teamID)) },
  {
    method: "GET",
    path: /^\/v2\/templates$/,
    handle(c) {
      const { page, next } = pageOf(c.templates.list(c.teamID), c.query);
      sendJson(c.res, 200, page, next ? { "x-next-token": next } : {});
    },
  },
  { method: "POST", path: /^\/templates$/, handle: async (c) => sendJson(c.res, 202, c.templates.createV1(c.teamID, parseDockerfileTemplate(await readJson(c.req), c.teamID))) },
  { method: "POST", path: /^\/v3\/templates$/, handle: async (c) => sendJson(c.res, 202, c.templates.createV3(c.teamID, parseNamedTemplate(await readJson(c.req)))) },
  { method: "POST", path: /^\/templates\/tags$/, handle: async (c) => sendJson(c.res, 201, c.templates.assignTags(c.teamID, parseTagAssignment(await readJson(c.req)))) },
  { method: "DELETE", path: /^\/templates\/tags$/, handle: async (c) => sendEmpty(c.res, (c.templates.removeTags(c.teamID, parseTagRemoval(await readJson(c.req))), 204)) },
  {
    method: "POST",
    path: new RegExp(`^/v2/templates/${SEG}/builds/${SEG}$`),
    param: "raw",
    async handle(c) {
      {
        const body = await readJson(c.req);
        c.templates.startBuild(c.teamID, templateParam(c.params[0]), c.params[1], parseBuildStart(body), parseRegistryCredentials(body));
      }
      sendJson(c.res, 202, {});
    },
  },
  {
    method: "GET",
    path: new RegExp(`^/templates/${SEG}/builds/${SEG}/status$`),
    param: "raw",
    handle: (c) => sendJson(c.res, 200, c.templates.status(c.teamID, templateParam(c.params[0]), c.params[1], c.query)),
  },
  {
    method: "GET",
    path: new RegExp(`^/templates/${SEG}/builds/${SEG}/logs$`),
    param: "raw",
    handle: (c) => sendJson(c.res, 200, c.templates.logs(c.teamID, templateParam(c.params[0]), c.params[1], c.query)),
  },
  {
    method: "GET",
    path: new RegExp(`^/templates/${SEG}/files/${SEG}$`),
    param: "raw",
    handle: (c) => sendJson(c.res, 201, c.templates.fileLink(c.teamID, templateParam(c.params[0]), c.params[1], hostOf(c))),
  },
  {
    method: "PUT",
    path: new RegExp(`^/templates/${SEG}/files/${SEG}$`),
    param: "raw",
    public: true,
    async handle(c) {
      try {
        await c.templates.upload(c.req, c.req.headers["content-length"], c.params[1], c.query.get("token") ?? "");
      } catch (err) {
        // the SDK reports a failed upload by its status text alone: make that the reason
        if (err instanceof DomainError && c.req.httpVersionMajor === 1 && "statusMessage" in c.res) c.res.statusMessage = err.message.replace(/[^\x20-\x7e]/g, "?").slice(0, 200);
        throw err;
      }
      sendJson(c.res, 200, {});
    },
  },
  { method: "GET", path: new RegExp(`^/templates/${SEG}$`), param: "raw", handle: (c) => sendJson(c.res, 200, c.templates.get(c.teamID, templateParam(c.params[0]))) },
  {
    method: "PATCH",
    path: new RegExp(`^/v2/templates/${SEG}$`),
    param: "raw",
    handle: async (c) => sendJson(c.res, 200, c.templates.update(c.teamID, templateParam(c.params[0]), parseTemplateUpdate(await readJson(c.req)))),
  },
  {
    // v1 (deprecated): the same update, answered 200 with no body
    method: "PATCH",
    path: new RegExp(`^/templates/${SEG}$`),
    param: "raw",
    handle: async (c) => {
      c.templates.update(c.teamID, templateParam(c.params[0]), parseTemplateUpdate(await readJson(c.req)));
      c.res.writeHead(200).end();
    },
  },
  { method: "GET", path: new RegExp(`^/templates/${SEG}/tags$`), param: "raw", handle: (c) => sendJson(c.res, 200, c.templates.tags(c.teamID, templateParam(c.params[0]))) },
  {
    method: "DELETE",
    path: new RegExp(`^/templates/${SEG}$`),
    param: "raw",
    handle: async (c) => sendEmpty(c.res, (await c.templates.remove(c.teamID, templateParam(c.params[0])), 204)),
  },
];

import { ApiError } from "../sandboxes/errors.js";
import { newCredential, type CredentialKind, type KeyInfo } from "../store/api-keys.js";
import { readJson, sendEmpty, sendJson } from "./http.js";
import type { Route, RouteContext } from "./routes.js";
import { invalid, objectBody, onlyKnown, optString } from "./validate.js";

/** Longest name a key or token may have. */
const MAX_NAME = 200;

/** The `{name}` body of a create or rename (E2B's NewTeamAPIKey, UpdateTeamAPIKey, NewAccessToken). */
async function nameOf(c: RouteContext): Promise<string> {
  const body = objectBody(await readJson(c.req), false);
  onlyKnown(body, ["name"], "");
  const name = optString(body, "name");
  if (name === undefined) throw invalid(`field "name" is required`);
  if (name.trim() === "" || name.length > MAX_NAME) throw invalid(`field "name" must be 1 to ${MAX_NAME} characters`);
  if (/[\u0000-\u001f\u007f]/.test(name)) throw invalid(`field "name" must not contain control characters`);
  return name;
}

/** A stored API key as E2B's TeamAPIKey (the key itself is never shown after its creation). */
const keyView = (k: KeyInfo) => ({ id: k.apiID, name: k.name, mask: k.mask, createdAt: k.createdAt, createdBy: null, lastUsed: k.lastUsed });

const what = (kind: CredentialKind) => (kind === "api_key" ? "API key" : "access token");

/** PATCH and DELETE of one credential, by the ID the API showed, within the caller's team only. */
function byId(kind: CredentialKind, base: string): Route[] {
  const path = new RegExp(`^/${base}/([^/]+)$`);
  const missing = (c: RouteContext) => new ApiError(404, `${what(kind)} '${c.params[0].slice(0, 64)}' not found`);
  const routes: Route[] = [
    {
      method: "DELETE",
      path,
      param: "raw",
      handle(c) {
        if (!c.store.apiKeys.remove(c.teamID, kind, c.params[0])) throw missing(c);
        sendEmpty(c.res, 204);
      },
    },
  ];
  if (kind === "api_key") {
    routes.push({
      method: "PATCH",
      path,
      param: "raw",
      async handle(c) {
        const name = await nameOf(c);
        if (!c.store.apiKeys.rename(c.teamID, kind, c.params[0], name)) throw missing(c);
        sendEmpty(c.res, 200);
      },
    });
  }
  return routes;
}

/**
 * The team's API keys and access tokens over the API, as E2B's spec has them. This server has no
 * users: the team is the principal, so any credential of a team manages the team's credentials
 * (as the admin CLI does on the host). A key or token is shown once, in the answer that made it.
 */
export const KEY_ROUTES: Route[] = [
  { method: "GET", path: /^\/api-keys$/, handle: (c) => sendJson(c.res, 200, c.store.apiKeys.listTeam(c.teamID, "api_key").map(keyView)) },
  {
    method: "POST",
    path: /^\/api-keys$/,
    async handle(c) {
      const name = await nameOf(c);
      const key = newCredential("api_key");
      const made = c.store.apiKeys.create("api_key", key, c.teamID, name);
      sendJson(c.res, 201, { ...keyView(made), key });
    },
  },
  ...byId("api_key", "api-keys"),
  {
    method: "POST",
    path: /^\/access-tokens$/,
    async handle(c) {
      const name = await nameOf(c);
      const token = newCredential("access_token");
      const made = c.store.apiKeys.create("access_token", token, c.teamID, name);
      sendJson(c.res, 201, { id: made.apiID, name: made.name, token, mask: made.mask, createdAt: made.createdAt });
    },
  },
  ...byId("access_token", "access-tokens"),
];

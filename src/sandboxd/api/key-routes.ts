import { invalid, Invalid, NotFound } from "../errors.js";
import { newCredential, type CredentialKind, type KeyInfo } from "../store/api-keys.js";
import { readJson, sendEmpty, sendJson } from "./http.js";
import type { Route, RouteContext } from "./route.js";
import { objectBody, onlyKnown, optString } from "./validate.js";

/** Longest name a key or token may have. */
const MAX_NAME = 200;
const what = (kind: CredentialKind) => (kind === "api_key" ? "API key" : "access token");

/** Most API keys, and most access tokens, one team may hold: any key can make more, so the store is bounded. */
export const MAX_PER_TEAM = 100;

/** A new credential of the caller's team, refused once the team holds MAX_PER_TEAM of that kind. */
function make(c: RouteContext, kind: CredentialKind, name: string): { secret: string; made: KeyInfo } {
  const secret = newCredential(kind);
  const made = c.store.transaction(() => {
    if (c.store.apiKeys.listTeam(c.teamID, kind).length >= MAX_PER_TEAM) throw new Invalid(`a team can hold at most ${MAX_PER_TEAM} ${what(kind)}s: delete one first`);
    return c.store.apiKeys.create(kind, secret, c.teamID, name);
  });
  return { secret, made };
}

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

/** PATCH and DELETE of one credential, by the ID the API showed, within the caller's team only. */
function byId(kind: CredentialKind, base: string): Route[] {
  const path = new RegExp(`^/${base}/([^/]+)$`);
  const missing = (c: RouteContext) => new NotFound(`${what(kind)} '${c.params[0].slice(0, 64)}' not found`);
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
      const { secret, made } = make(c, "api_key", await nameOf(c));
      sendJson(c.res, 201, { ...keyView(made), key: secret });
    },
  },
  ...byId("api_key", "api-keys"),
  {
    method: "POST",
    path: /^\/access-tokens$/,
    async handle(c) {
      const { secret, made } = make(c, "access_token", await nameOf(c));
      sendJson(c.res, 201, { id: made.apiID, name: made.name, token: secret, mask: made.mask, createdAt: made.createdAt });
    },
  },
  ...byId("access_token", "access-tokens"),
];

import { Forbidden } from "../errors.js";
import type { NetworkUpdate } from "../sandboxes/inputs.js";
import { checkEgressRules, checkRules } from "./create-body.js";
import { readJson, sendEmpty } from "./http.js";
import type { Route, RouteContext } from "./route.js";
import { objectBody, onlyKnown, optBool, optStringList } from "./validate.js";

/** The body of PUT /sandboxes/{id}/network: a full replacement, every field optional. */
export function parseNetworkUpdate(body: unknown): NetworkUpdate {
  const o = objectBody(body, true);
  onlyKnown(o, ["allowOut", "denyOut", "rules", "egressProxy", "allow_internet_access"], "");
  const allowOut = optStringList(o, "allowOut", "allowOut");
  const denyOut = optStringList(o, "denyOut", "denyOut");
  checkRules(o.rules, "rules");
  if (o.egressProxy !== undefined && o.egressProxy !== null) throw new Forbidden("egress proxy is not enabled for this team");
  const allowInternetAccess = optBool(o, "allow_internet_access");
  checkEgressRules(allowOut, denyOut);
  return {
    ...(allowOut ? { allowOut } : {}),
    ...(denyOut ? { denyOut } : {}),
    ...(o.rules ? { rules: o.rules as Record<string, unknown> } : {}),
    ...(allowInternetAccess !== undefined ? { allowInternetAccess } : {}),
  };
}

/** The network routes of the control API. */
export const NETWORK_ROUTES: Route[] = [
  {
    method: "PUT",
    path: /^\/sandboxes\/([^/]+)\/network$/,
    async handle(c: RouteContext) {
      await c.sandboxes.updateNetwork(c.teamID, c.id, parseNetworkUpdate(await readJson(c.req)));
      sendEmpty(c.res);
    },
  },
];

/** The control API's snapshot and fork routes: take, list and delete snapshots; fork a sandbox. */
import { errorAnswer } from "./errors.js";
import { readJson, sendEmpty, sendJson } from "./http.js";
import type { Route, RouteContext } from "./route.js";
import { TEMPLATE_ROUTES } from "./template-routes.js";
import { objectBody, onlyKnown, optInt } from "./validate.js";
import { invalid, NotFound } from "../errors.js";
import { MAX_FORKS } from "../sandboxes/fork.js";
import { checkSnapshotName } from "../sandboxes/snapshots.js";

const ID = "([^/]+)";

/** The fork timeout when a client sends none (the schema's default), seconds. */
const FORK_DEFAULT_TIMEOUT_S = 15;

/** `limit` of GET /snapshots: 1..100, default 100 (larger asks get 100, as the sandbox list does). */
function limitOf(q: URLSearchParams): number {
  const raw = q.get("limit");
  if (raw === null) return 100;
  if (!/^-?\d+$/.test(raw)) throw invalid(`parameter "limit" must be an integer`);
  if (Number(raw) < 1) throw invalid(`parameter "limit": number must be at least 1`);
  return Math.min(Number(raw), 100);
}

/** The template route DELETE /templates/{id} that a reference naming no snapshot goes on to. */
const deleteTemplate = TEMPLATE_ROUTES.find((r) => r.method === "DELETE" && r.path.test("/templates/x"))!;

/**
 * DELETE of a snapshot by the reference the SDK hands out (`<id>:default` or `<team>/<name>:<tag>`):
 * 204, or 404 for a reference only a snapshot could have; any other goes to the template route.
 */
async function deleteByRef(c: RouteContext): Promise<void> {
  const ref = c.params[0];
  if (await c.sandboxes.deleteSnapshot(c.teamID, ref)) return sendEmpty(c.res, 204);
  if (/[:/]/.test(ref) || !deleteTemplate) throw new NotFound(`snapshot '${ref.slice(0, 128)}' not found`);
  await deleteTemplate.handle(c);
}

/** The snapshot and fork routes; listed before the template routes (a snapshot's DELETE comes first). */
export const SNAPSHOT_ROUTES: Route[] = [
  {
    method: "POST",
    path: new RegExp(`^/sandboxes/${ID}/snapshots$`),
    async handle(c) {
      const body = objectBody(await readJson(c.req), true);
      onlyKnown(body, ["name"], "");
      sendJson(c.res, 201, await c.sandboxes.snapshot(c.teamID, c.id, checkSnapshotName(body.name)));
    },
  },
  {
    method: "GET",
    path: /^\/snapshots$/,
    handle(c) {
      const q = c.query;
      const r = c.sandboxes.listSnapshots(c.teamID, {
        sandboxID: q.get("sandboxID") ?? undefined, name: q.get("name") ?? undefined, limit: limitOf(q), nextToken: q.get("nextToken") ?? undefined,
      });
      sendJson(c.res, 200, r.items, r.nextToken ? { "x-next-token": r.nextToken } : {});
    },
  },
  { method: "DELETE", path: new RegExp(`^/snapshots/${ID}$`), param: "raw", handle: deleteByRef },
  // DELETE /templates/tags is the template routes' own (tag removal), never a reference
  { method: "DELETE", path: new RegExp(`^/templates/(?!tags$)${ID}$`), param: "raw", handle: deleteByRef },
  {
    method: "POST",
    path: new RegExp(`^/sandboxes/${ID}/fork$`),
    async handle(c) {
      const body = objectBody(await readJson(c.req), true);
      onlyKnown(body, ["count", "timeout"], "");
      const count = optInt(body, "count") ?? 1;
      if (count < 1 || count > MAX_FORKS) throw invalid(`field "count": number must be between 1 and ${MAX_FORKS}`);
      const timeout = optInt(body, "timeout") ?? FORK_DEFAULT_TIMEOUT_S;
      const results = await c.sandboxes.fork(c.teamID, c.id, count, timeout);
      sendJson(c.res, 201, results.map((r) => ("sandbox" in r ? r : { error: errorAnswer(r.error).body })));
    },
  },
];

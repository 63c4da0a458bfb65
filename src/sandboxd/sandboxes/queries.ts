/** What the API reads of a team's sandboxes: one sandbox, the two lists, a console tail. */
import type { ListQuery } from "./inputs.js";
import type { Lifecycle } from "./lifecycle.js";
import { decodeCursor, matchesMetadata, page, sortRows } from "./list.js";
import { detailBody, listedBody } from "./views.js";

type Body = Record<string, unknown>;

/** GET /sandboxes/{id}. */
export function getSandbox(l: Lifecycle, teamID: string, id: string): Body {
  const row = l.owned(teamID, id);
  return detailBody(row, l.store.templates.get(row.templateID), l.tokenOf(row));
}

/** The tail of a running or paused sandbox's console output (envd's log lines), with when it started. */
export async function consoleOutput(l: Lifecycle, teamID: string, id: string, maxBytes: number): Promise<{ bytes: Buffer; startedAt: string }> {
  const row = l.owned(teamID, id);
  return { bytes: (await l.runtime.consoleTail(row.id, maxBytes)) ?? Buffer.alloc(0), startedAt: row.startedAt };
}

/** GET /sandboxes: the team's running sandboxes matching the metadata, newest first. */
export function listV1(l: Lifecycle, teamID: string, metadata: [string, string][]): Body[] {
  const { store } = l;
  const rows = store.sandboxes.listByTeam(teamID).filter((r) => r.state === "running" && matchesMetadata(r, metadata));
  return sortRows(rows, "desc").map((r) => listedBody(r, store.templates.get(r.templateID)));
}

/** GET /v2/sandboxes: one page of the team's sandboxes by state, metadata, start and template. */
export function listV2(l: Lifecycle, teamID: string, q: ListQuery): { items: Body[]; nextToken?: string; totalRunning?: number } {
  const { store } = l;
  const cursor = q.nextToken ? decodeCursor(q.nextToken, q.order) : undefined;
  let rows = store.sandboxes.listByTeam(teamID).filter((r) => r.state !== "starting" && q.states.includes(r.state) && matchesMetadata(r, q.metadata));
  if (q.startedAfter !== undefined) rows = rows.filter((r) => Date.parse(r.startedAt) >= q.startedAfter!);
  if (q.template !== undefined) {
    const tpl = store.templates.get(q.template) ?? store.templates.byAlias(q.template);
    rows = tpl && tpl.teamID === teamID ? rows.filter((r) => r.templateID === tpl.id) : [];
  }
  const totalRunning = q.states.includes("running") ? rows.filter((r) => r.state === "running").length : undefined;
  const { items, next } = page(sortRows(rows, q.order), q.order, q.limit, cursor);
  return { items: items.map((r) => listedBody(r, store.templates.get(r.templateID))), nextToken: next, totalRunning };
}

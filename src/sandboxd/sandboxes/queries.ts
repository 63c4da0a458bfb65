/**
 * What the API reads of a team's sandboxes: one sandbox, the two lists, a console tail. The lists
 * read the lifecycle's in-memory mirror of the rows (kept sorted), so a page costs the page plus
 * one cheap pass over the team's rows, not a read and parse of every row.
 */
import type { Store } from "../store/store.js";
import type { Template } from "../store/templates.js";
import type { ListedRow } from "./index.js";
import type { ListQuery } from "./inputs.js";
import type { Lifecycle } from "./lifecycle.js";
import { decodeCursor, encodeCursor, matchesMetadata } from "./list.js";
import { detailBody, listedBody } from "./views.js";

type Body = Record<string, unknown>;

/** Templates by ID, each read from the store once per request. */
function templateReader(store: Store): (id: string) => Template | undefined {
  const seen = new Map<string, Template | undefined>();
  return (id) => {
    if (!seen.has(id)) seen.set(id, store.templates.get(id));
    return seen.get(id);
  };
}

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
  const tpl = templateReader(l.store);
  const out: Body[] = [];
  for (const { row } of l.rows.sorted(teamID)) if (row.state === "running" && matchesMetadata(row, metadata)) out.push(listedBody(row, tpl(row.templateID)));
  return out;
}

/** GET /v2/sandboxes: one page of the team's sandboxes by state, metadata, start and template. */
export function listV2(l: Lifecycle, teamID: string, q: ListQuery): { items: Body[]; nextToken?: string; totalRunning?: number } {
  const { store } = l;
  const cursor = q.nextToken ? decodeCursor(q.nextToken, q.order) : undefined;
  const counting = q.states.includes("running");
  let templateID: string | undefined;
  if (q.template !== undefined) {
    const t = store.templates.get(q.template) ?? store.templates.byAlias(q.template);
    if (!t || t.teamID !== teamID) return { items: [], totalRunning: counting ? 0 : undefined };
    templateID = t.id;
  }
  const wanted = ({ row, ts }: ListedRow) =>
    row.state !== "starting" && q.states.includes(row.state) && matchesMetadata(row, q.metadata) &&
    (q.startedAfter === undefined || ts >= q.startedAfter) && (templateID === undefined || row.templateID === templateID);
  const past = ({ row, ts }: ListedRow) =>
    !cursor || (q.order === "desc" ? ts < cursor.ts || (ts === cursor.ts && row.id > cursor.id) : ts > cursor.ts || (ts === cursor.ts && row.id < cursor.id));
  const sorted = l.rows.sorted(teamID);
  const n = sorted.length;
  const items: ListedRow[] = [];
  let more = false;
  let running = 0;
  for (let i = 0; i < n; i++) {
    const e = sorted[q.order === "desc" ? i : n - 1 - i];
    if (!wanted(e)) continue;
    if (e.row.state === "running") running++;
    if (!past(e)) continue;
    if (items.length < q.limit) items.push(e);
    else more = true;
  }
  const tpl = templateReader(store);
  return {
    items: items.map(({ row }) => listedBody(row, tpl(row.templateID))),
    nextToken: more ? encodeCursor(items[items.length - 1].row, q.order) : undefined,
    totalRunning: counting ? running : undefined,
  };
}

import { Invalid, invalid } from "../errors.js";
import type { ListQuery } from "../sandboxes/inputs.js";
import { parseMetadataFilter } from "../sandboxes/list.js";

/** The query of GET /v2/sandboxes, checked as the API's validator does. */
export function parseListQuery(q: URLSearchParams): ListQuery {
  const states = (q.get("state") ?? "running,paused").split(",").filter((s) => s !== "");
  for (const s of states) if (s !== "running" && s !== "paused") throw invalid(`parameter "state": value "${s}" is not one of running, paused`);
  const order = q.get("order") ?? "desc";
  if (order !== "asc" && order !== "desc") throw invalid(`parameter "order": value "${order}" is not one of asc, desc`);
  let limit = 100;
  const rawLimit = q.get("limit");
  if (rawLimit !== null) {
    if (!/^-?\d+$/.test(rawLimit)) throw invalid(`parameter "limit" must be an integer`);
    limit = Number(rawLimit);
    if (limit < 1) throw invalid(`parameter "limit": number must be at least 1`);
    limit = Math.min(limit, 100);
  }
  let startedAfter: number | undefined;
  const sa = q.get("startedAfter");
  if (sa !== null) {
    startedAfter = Date.parse(sa);
    if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/.test(sa) || !Number.isFinite(startedAfter)) throw invalid(`parameter "startedAfter" must be an RFC 3339 date-time`);
  }
  const template = q.get("template") ?? undefined;
  if (template !== undefined && template.includes(":")) throw new Invalid("template filter cannot include a tag");
  return {
    states: [...new Set(states)] as ListQuery["states"],
    metadata: parseMetadataFilter(q.get("metadata")),
    order,
    limit,
    nextToken: q.get("nextToken") ?? undefined,
    startedAfter,
    template: template?.toLowerCase(),
  };
}

import { invalid } from "../errors.js";
import { API_LOG_LEVELS, type ApiLogLevel, type ConsoleEntry, parseConsole } from "../sandboxes/console-log.js";
import { sendJson } from "./http.js";
import type { Route, RouteContext } from "./route.js";

/** How much of a sandbox's console output the log routes read (its newest bytes). */
const READ_BYTES = 1024 * 1024;
/** Most entries one request returns, and the default (E2B's). */
const MAX_LIMIT = 1000;

/** An optional integer query parameter of at least `min`. */
function intParam(q: URLSearchParams, name: string, min: number): number | undefined {
  const raw = q.get(name);
  if (raw === null || raw === "") return undefined;
  if (!/^-?\d{1,16}$/.test(raw)) throw invalid(`parameter "${name}" must be an integer`);
  const n = Number(raw);
  if (n < min) throw invalid(`parameter "${name}": number must be at least ${min}`);
  return n;
}

function oneOf<T extends string>(q: URLSearchParams, name: string, values: readonly T[]): T | undefined {
  const raw = q.get(name);
  if (raw === null || raw === "") return undefined;
  if (!(values as readonly string[]).includes(raw)) throw invalid(`parameter "${name}": value "${raw.slice(0, 100)}" is not one of ${values.join(", ")}`);
  return raw as T;
}

/** The sandbox's console output as log entries, oldest first. */
async function entries(c: RouteContext): Promise<ConsoleEntry[]> {
  const out = await c.sandboxes.consoleOutput(c.teamID, c.id, READ_BYTES);
  const startedMs = Date.parse(out.startedAt);
  return parseConsole(out.bytes, Number.isFinite(startedMs) ? startedMs : 0, out.bytes.length >= READ_BYTES);
}

const entryBody = (e: ConsoleEntry) => ({ timestamp: new Date(e.ms).toISOString(), level: e.level, message: e.message, fields: e.fields });

/** GET /sandboxes/{id}/logs and /v2/sandboxes/{id}/logs: envd's and PID 1's output as E2B's sandbox logs. */
export const LOGS_ROUTES: Route[] = [
  {
    method: "GET",
    path: /^\/sandboxes\/([^/]+)\/logs$/,
    async handle(c) {
      const start = intParam(c.query, "start", 0) ?? 0;
      const limit = Math.min(intParam(c.query, "limit", 0) ?? MAX_LIMIT, MAX_LIMIT);
      const picked = (await entries(c)).filter((e) => e.ms >= start).slice(0, limit);
      sendJson(c.res, 200, {
        logs: picked.map((e) => ({ timestamp: new Date(e.ms).toISOString(), line: e.line })),
        logEntries: picked.map(entryBody),
      });
    },
  },
  {
    method: "GET",
    path: /^\/v2\/sandboxes\/([^/]+)\/logs$/,
    async handle(c) {
      const cursor = intParam(c.query, "cursor", 0);
      const limit = Math.min(intParam(c.query, "limit", 0) ?? MAX_LIMIT, MAX_LIMIT);
      const direction = oneOf(c.query, "direction", ["forward", "backward"] as const) ?? "forward";
      const level = oneOf<ApiLogLevel>(c.query, "level", API_LOG_LEVELS);
      const search = c.query.get("search") ?? "";
      const least = level ? API_LOG_LEVELS.indexOf(level) : 0;
      let all = (await entries(c)).filter((e) => API_LOG_LEVELS.indexOf(e.level) >= least && e.message.includes(search));
      if (direction === "forward") {
        if (cursor !== undefined) all = all.filter((e) => e.ms >= cursor);
      } else {
        if (cursor !== undefined) all = all.filter((e) => e.ms <= cursor);
        all.reverse();
      }
      sendJson(c.res, 200, { logs: all.slice(0, limit).map(entryBody) });
    },
  },
];

import { prometheusText } from "../metrics/prometheus.js";
import { queryRange } from "../metrics/range.js";
import { teamMax, teamRange, teamSeries } from "../metrics/team-query.js";
import { Forbidden, Invalid, sandboxNotFound, Unavailable } from "../errors.js";
import type { SandboxSample } from "../store/sandbox-metrics.js";
import { sendJson } from "./http.js";
import type { Route, RouteContext } from "./route.js";
import { shortId } from "./validate.js";

/** Most sandboxes one GET /sandboxes/metrics may name. */
const MAX_IDS = 100;

/** A sample as E2B's SandboxMetric. */
const metricItem = (s: SandboxSample) => ({
  timestamp: new Date(s.ts * 1000).toISOString(), timestampUnix: s.ts, cpuCount: s.cpuCount, cpuUsedPct: s.cpuUsedPct,
  memUsed: s.memUsed, memTotal: s.memTotal, memCache: s.memCache, diskUsed: s.diskUsed, diskTotal: s.diskTotal,
});

/** The metrics service, or a 503 when this server runs without it. */
function need(c: RouteContext) {
  if (!c.metrics) throw new Unavailable("metrics are not collected by this server");
  return c.metrics;
}

const nowS = (c: RouteContext) => Math.floor(need(c).clock() / 1000);

/** The path's team must be the caller's (E2B's 403 otherwise). */
function ownTeam(c: RouteContext): string {
  if (c.alias !== c.teamID) throw new Forbidden(`You (${c.teamID}) are not authorized to access this team's (${c.alias.slice(0, 100)}) metrics`);
  return c.teamID;
}

/** Longest range a query may span: a month, or the retention when that is longer. */
const maxRange = (c: RouteContext) => Math.max(31 * 86400, need(c).retentionS);

const TEAM = "([^/]+)";

/** Team info, team metrics, sandbox metrics and the Prometheus text (before the /sandboxes/{id} routes). */
export const METRICS_ROUTES: Route[] = [
  {
    method: "GET",
    path: /^\/teams$/,
    handle(c) {
      // E2B's Team carries the team's API key, which the CLI stores for later calls. Keys are kept
      // hashed, so the only one this server can hand back is the one the caller sent.
      const team = c.store.teams.get(c.teamID);
      sendJson(c.res, 200, [{ teamID: c.teamID, name: team?.name ?? c.teamID, isDefault: true, apiKey: c.caller.apiKey ?? "" }]);
    },
  },
  {
    method: "GET",
    path: new RegExp(`^/teams/${TEAM}/metrics$`),
    param: "alias",
    handle(c) {
      const team = ownTeam(c);
      sendJson(c.res, 200, teamSeries(c.store.teamMetrics, team, teamRange(c.query, nowS(c), maxRange(c))));
    },
  },
  {
    method: "GET",
    path: new RegExp(`^/teams/${TEAM}/metrics/max$`),
    param: "alias",
    handle(c) {
      const team = ownTeam(c);
      sendJson(c.res, 200, teamMax(c.store.teamMetrics, team, teamRange(c.query, nowS(c), maxRange(c)), c.query.get("metric")));
    },
  },
  {
    method: "GET",
    path: /^\/sandboxes\/metrics$/,
    handle(c) {
      const raw = c.query.getAll("sandbox_ids").flatMap((v) => v.split(",")).map((v) => v.trim()).filter(Boolean);
      if (raw.length === 0) throw new Invalid(`validation error: query parameter "sandbox_ids" is required (comma-separated sandbox IDs)`);
      if (raw.length > MAX_IDS) throw new Invalid(`validation error: query parameter "sandbox_ids" names ${raw.length} sandboxes; at most ${MAX_IDS}`);
      const sandboxes: Record<string, ReturnType<typeof metricItem>> = {};
      for (const id of new Set(raw.map(shortId))) {
        const row = c.store.sandboxes.get(id);
        if (!row || row.teamID !== c.teamID || row.state === "starting") continue;
        const s = need(c).poller.latest(id) ?? c.store.sandboxMetrics.latest(id);
        if (s) sandboxes[id] = metricItem(s);
      }
      sendJson(c.res, 200, { sandboxes });
    },
  },
  {
    method: "GET",
    path: /^\/sandboxes\/([^/]+)\/metrics$/,
    handle(c) {
      const row = c.store.sandboxes.get(c.id);
      if (!row || row.teamID !== c.teamID || row.state === "starting") throw sandboxNotFound(c.id);
      const born = Math.floor(Date.parse(row.startedAt) / 1000);
      const range = queryRange(c.query, nowS(c), () => born, maxRange(c));
      sendJson(c.res, 200, c.store.sandboxMetrics.range(row.id, range.start, range.end).map(metricItem));
    },
  },
  {
    method: "GET",
    path: /^\/metrics$/,
    handle(c) {
      const text = prometheusText(need(c), c.teamID);
      c.res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8", "content-length": String(Buffer.byteLength(text)), "cache-control": "no-store" });
      c.res.end(text);
    },
  },
];

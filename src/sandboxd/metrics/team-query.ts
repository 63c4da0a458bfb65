import { Invalid } from "../errors.js";
import type { TeamMetrics } from "../store/team-metrics.js";
import { DEFAULT_RANGE_S, queryRange, stepFor, type Range } from "./range.js";

/** One item of GET /teams/{teamID}/metrics (seed §2.8; `timestamp` is deprecated but still sent). */
export interface TeamMetricItem {
  timestamp: string;
  timestampUnix: number;
  concurrentSandboxes: number;
  sandboxStartRate: number;
}

/** The answer of GET /teams/{teamID}/metrics/max. */
export interface TeamMetricMax {
  timestamp: string;
  timestampUnix: number;
  value: number;
}

const iso = (s: number) => new Date(s * 1000).toISOString();

/** Starts per second in a bucket: the sum over the bucket, or over a compacted row when it is wider. */
const rate = (started: number, step: number, res: number) => started / Math.max(step, res);

/** The range a team query covers: default the last 7 days, at most `maxRange` seconds long. */
export function teamRange(query: URLSearchParams, nowS: number, maxRange?: number): Range {
  return queryRange(query, nowS, (end) => end - DEFAULT_RANGE_S, maxRange);
}

/**
 * The team's series over the range: per `stepFor(length)` bucket, the gauge's max and the starts
 * summed and divided by the step; only buckets with data, ascending.
 */
export function teamSeries(table: TeamMetrics, teamID: string, range: Range): TeamMetricItem[] {
  const step = stepFor(range.end - range.start);
  return table.buckets(teamID, range.start, range.end, step).map((b) => ({
    timestamp: iso(b.ts),
    timestampUnix: b.ts,
    concurrentSandboxes: b.concurrent,
    sandboxStartRate: rate(b.started, step, b.res),
  }));
}

/** The metrics `/max` knows, as E2B names them. */
const MAX_METRICS = ["concurrent_sandboxes", "sandbox_start_rate"] as const;

/**
 * The highest value of one metric over the range and when: the gauge's highest sample, or the
 * bucket with the highest start rate (earliest on a tie). No data: value 0 at the range's start.
 */
export function teamMax(table: TeamMetrics, teamID: string, range: Range, metric: string | null): TeamMetricMax {
  if (metric === null) throw new Invalid(`validation error: query parameter "metric" is required (${MAX_METRICS.join(" or ")})`);
  if (!(MAX_METRICS as readonly string[]).includes(metric)) {
    throw new Invalid(`validation error: query parameter "metric" must be one of ${MAX_METRICS.join(", ")}, got '${metric.slice(0, 40)}'`);
  }
  let best: { ts: number; value: number } | undefined;
  if (metric === "concurrent_sandboxes") {
    best = table.maxConcurrent(teamID, range.start, range.end);
  } else {
    const step = stepFor(range.end - range.start);
    for (const b of table.buckets(teamID, range.start, range.end, step)) {
      const value = rate(b.started, step, b.res);
      if (!best || value > best.value) best = { ts: b.ts, value };
    }
  }
  const at = best ?? { ts: range.start, value: 0 };
  return { timestamp: iso(at.ts), timestampUnix: at.ts, value: at.value };
}

import { Invalid } from "../errors.js";

const HOUR = 3600;
const DAY = 24 * HOUR;

/** The default range of the team metrics: the last 7 days. */
export const DEFAULT_RANGE_S = 7 * DAY;
/** Longest range a query may ask for (a longer retention raises it to the retention). */
export const MAX_RANGE_S = 31 * DAY;
/** Latest timestamp accepted (the year 2200): beyond it a value is a mistake, not a time. */
const MAX_TS = 7_258_118_400;

/** The bucket width for a range's length, E2B's table: <1 h 5 s, <6 h 30 s, <12 h 1 min, <24 h 2 min, <7 d 5 min, else 15 min. */
export function stepFor(rangeS: number): number {
  if (rangeS < HOUR) return 5;
  if (rangeS < 6 * HOUR) return 30;
  if (rangeS < 12 * HOUR) return 60;
  if (rangeS < DAY) return 120;
  if (rangeS < 7 * DAY) return 300;
  return 900;
}

/** An optional unix-seconds query parameter: digits only, within [0, year 2200]; anything else is Invalid. */
export function unixParam(query: URLSearchParams, name: string): number | undefined {
  const raw = query.get(name);
  if (raw === null) return undefined;
  if (!/^\d{1,12}$/.test(raw.trim()) || Number(raw) > MAX_TS) {
    throw new Invalid(`validation error: query parameter "${name}" must be a unix time in seconds (a whole number between 0 and ${MAX_TS}), got '${raw.slice(0, 40)}'`);
  }
  return Number(raw);
}

/** A checked [start, end] in unix seconds. */
export interface Range {
  start: number;
  end: number;
}

/**
 * The range of a metrics query: `end` defaults to now, `start` to `defaultStart(end)`; start after
 * end, or a range longer than `maxRange` seconds, is Invalid.
 */
export function queryRange(query: URLSearchParams, nowS: number, defaultStart: (end: number) => number, maxRange = MAX_RANGE_S): Range {
  const end = unixParam(query, "end") ?? nowS;
  const start = unixParam(query, "start") ?? Math.min(defaultStart(end), end);
  if (start > end) throw new Invalid(`start (${start}) cannot be after end (${end})`);
  if (end - start > maxRange) {
    throw new Invalid(`the range from start to end is ${Math.ceil((end - start) / DAY)} days; it can be at most ${Math.floor(maxRange / DAY)} days`);
  }
  return { start, end };
}

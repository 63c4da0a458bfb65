/** A log level as E2B's API names them. */
export type ApiLogLevel = "debug" | "info" | "warn" | "error";

/** The API's levels, least severe first. */
export const API_LOG_LEVELS: readonly ApiLogLevel[] = ["debug", "info", "warn", "error"];

/** One line of a sandbox's console output, read as E2B's sandbox log entry. */
export interface ConsoleEntry {
  /** ms since the epoch. */
  ms: number;
  level: ApiLogLevel;
  message: string;
  fields: Record<string, string>;
  /** The line as written (cut to MAX_LINE) when it is one of envd's JSON lines; otherwise the entry as such a line. */
  line: string;
}

/** Longest line kept whole; longer ones are cut (the rest of the line is dropped). */
export const MAX_LINE = 16 * 1024;

const LEVELS = new Map<string, ApiLogLevel>([
  ["trace", "debug"], ["debug", "debug"], ["info", "info"], ["warn", "warn"], ["warning", "warn"], ["error", "error"], ["fatal", "error"], ["panic", "error"],
]);
/** Keys of envd's JSON lines that are the entry itself, not its fields. */
const OWN_KEYS = new Set(["level", "time", "msg", "message"]);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Reads console output as log entries, oldest first. envd's JSON lines (`level`, `time`, `msg`
 * and fields) keep their level, time and fields; any other line (tini, the shell that restarts
 * envd, or bytes a sandbox wrote there) is an info entry timed as the line before it, or at
 * `fallbackMs` when no line before it has a time. Times run forward only (a line cannot claim
 * to be older than the one before it), so the entries stay in order for time cursors. `cutStart`: the bytes begin mid-line (a tail of a longer output), so the first line
 * is dropped. Never throws; the bytes may be anything.
 */
export function parseConsole(bytes: Buffer, fallbackMs: number, cutStart: boolean): ConsoleEntry[] {
  const text = bytes.toString("utf8");
  const lines = text.split("\n");
  if (cutStart) lines.shift();
  const out: ConsoleEntry[] = [];
  let last: number | undefined;
  for (const raw of lines) {
    const line = (raw.endsWith("\r") ? raw.slice(0, -1) : raw).slice(0, MAX_LINE);
    if (line.trim() === "") continue;
    const e = fromJson(line) ?? { level: "info" as const, message: line, fields: {}, clean: false };
    const ms = e.ms === undefined ? (last ?? fallbackMs) : Math.max(e.ms, last ?? e.ms);
    last = ms;
    // clients parse each line as one of envd's (E2B's CLI reads its `level` as a string): others are rewritten as one
    const asWritten = e.clean && ms === e.ms;
    const text = asWritten ? line : JSON.stringify({ ...e.fields, level: e.level, time: new Date(ms).toISOString(), msg: e.message });
    out.push({ ms, level: e.level, message: e.message, fields: e.fields, line: text });
  }
  return out;
}

/** A JSON line read; `clean`: it is one as envd writes them (a known level, a time, a message). */
function fromJson(line: string): { ms?: number; level: ApiLogLevel; message: string; fields: Record<string, string>; clean: boolean } | undefined {
  if (!line.startsWith("{")) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (!isObject(v)) return undefined;
  const msg = typeof v.msg === "string" ? v.msg : typeof v.message === "string" ? v.message : undefined;
  if (msg === undefined) return undefined;
  const t = typeof v.time === "string" ? Date.parse(v.time) : typeof v.time === "number" ? v.time : NaN;
  const fields: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [k, val] of Object.entries(v)) {
    if (OWN_KEYS.has(k) || val === undefined) continue;
    fields[k] = typeof val === "string" ? val : JSON.stringify(val);
  }
  const level = typeof v.level === "string" ? LEVELS.get(v.level.toLowerCase()) : undefined;
  const ms = Number.isFinite(t) && t > 0 && t < 8.64e15 ? t : undefined;
  return { ms, level: level ?? "info", message: msg, fields, clean: level !== undefined && ms !== undefined };
}

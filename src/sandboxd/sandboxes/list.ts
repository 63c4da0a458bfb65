import type { SandboxRow } from "../store/sandboxes.js";
import { Invalid } from "../errors.js";

/** Go's url.QueryUnescape: `+` is a space, `%XX` a byte; a bad escape is an error. */
function queryUnescape(s: string): string {
  return decodeURIComponent(s.replace(/\+/g, " "));
}

/**
 * E2B's metadata filter: the (already once-decoded) query value is unescaped again, split on `&`
 * into `key=value` pairs, and each side unescaped a third time, as the SDK encodes three times.
 */
export function parseMetadataFilter(raw: string | null): [string, string][] {
  if (raw === null || raw === "") return [];
  let whole: string;
  try {
    whole = queryUnescape(raw);
  } catch {
    throw new Invalid("Error parsing metadata");
  }
  return whole.split("&").map((part) => {
    const kv = part.split("=");
    if (kv.length !== 2) throw new Invalid("invalid key value pair in query");
    try {
      return [queryUnescape(kv[0]), queryUnescape(kv[1])] as [string, string];
    } catch {
      throw new Invalid("Error parsing metadata");
    }
  });
}

/** Whether a sandbox's metadata has every pair (a sandbox without metadata matches no filter). */
export function matchesMetadata(row: SandboxRow, pairs: [string, string][]): boolean {
  if (pairs.length === 0) return true;
  if (Object.keys(row.metadata).length === 0) return false;
  return pairs.every(([k, v]) => Object.hasOwn(row.metadata, k) && row.metadata[k] === v);
}

/** Sorts rows as E2B lists them: desc = (startedAt DESC, sandboxID ASC), asc the exact reverse. */
export function sortRows(rows: SandboxRow[], order: "asc" | "desc"): SandboxRow[] {
  const desc = (a: SandboxRow, b: SandboxRow) => Date.parse(b.startedAt) - Date.parse(a.startedAt) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  return [...rows].sort(order === "desc" ? desc : (a, b) => desc(b, a));
}

/** A page cursor: base64url (padded) of "<startedAt>__<sandboxID>", with "__asc" for ascending order. */
export function encodeCursor(row: SandboxRow, order: "asc" | "desc"): string {
  const raw = `${row.startedAt}__${row.id}${order === "asc" ? "__asc" : ""}`;
  const b = Buffer.from(raw, "utf8").toString("base64url");
  return b + "=".repeat((4 - (b.length % 4)) % 4);
}

/** Reads a cursor back; a malformed one, or one made for the other order, is Invalid. */
export function decodeCursor(token: string, order: "asc" | "desc"): { ts: number; id: string } {
  const bad = new Invalid("Invalid next token");
  if (!/^[A-Za-z0-9_-]+={0,2}$/.test(token)) throw bad;
  const parts = Buffer.from(token.replace(/=+$/, ""), "base64url").toString("utf8").split("__");
  const asc = parts.length === 3 && parts[2] === "asc";
  if (!(parts.length === 2 || asc) || asc !== (order === "asc")) throw bad;
  const ts = Date.parse(parts[0]);
  if (!Number.isFinite(ts) || !/^\d{4}-\d\d-\d\dT/.test(parts[0]) || !/^[a-z0-9]+$/.test(parts[1])) throw bad;
  return { ts, id: parts[1] };
}

/** The page after `cursor` of sorted rows, and the cursor of the next page when more rows exist. */
export function page(sorted: SandboxRow[], order: "asc" | "desc", limit: number, cursor?: { ts: number; id: string }): { items: SandboxRow[]; next?: string } {
  const after = cursor
    ? sorted.filter((r) => {
        const ts = Date.parse(r.startedAt);
        return order === "desc" ? ts < cursor.ts || (ts === cursor.ts && r.id > cursor.id) : ts > cursor.ts || (ts === cursor.ts && r.id < cursor.id);
      })
    : sorted;
  const items = after.slice(0, limit);
  return after.length > limit ? { items, next: encodeCursor(items[items.length - 1], order) } : { items };
}

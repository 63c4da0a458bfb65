/**
 * The lifecycle's in-memory views of the store: the routes the proxy reads, and the rows the API
 * lists (each team's, kept sorted for listing), so no request reads or parses every row.
 */
import type { RouteIndex, RouteTarget } from "../proxy/target.js";
import type { SandboxRow } from "../store/sandboxes.js";

/** The in-memory map of routable sandboxes the proxy reads (kept in step with the store by the lifecycle). */
export interface SandboxIndex extends RouteIndex {
  set(target: RouteTarget): void;
  delete(sandboxID: string): void;
  size(): number;
}

/** An empty index. */
export function createSandboxIndex(): SandboxIndex {
  const map = new Map<string, RouteTarget>();
  return {
    lookup: (id) => map.get(id),
    set: (t) => void map.set(t.sandboxID, Object.freeze({ ...t })),
    delete: (id) => void map.delete(id),
    size: () => map.size,
  };
}

/** A listed row with its start as epoch ms (parsed once, not per comparison). */
export interface ListedRow {
  row: Readonly<SandboxRow>;
  ts: number;
}

/** How the store is read: one row by ID, or every row. */
export interface RowSource {
  get(id: string): SandboxRow | undefined;
  all(): SandboxRow[];
}

/**
 * The store's sandbox rows held in memory for the lists. A write marks its ID (`touch`); the next
 * read takes that row again from the store, so the mirror holds what was committed (a write rolled
 * back with its transaction is read back as it stands). Nothing is read before the first list.
 */
export interface RowMirror {
  /** The row of `id` changed or went: read it again before the next list. */
  touch(id: string): void;
  /** A team's rows, newest first as E2B lists them (startedAt DESC, sandboxID ASC); do not mutate. */
  sorted(teamID: string): readonly ListedRow[];
  /** How many rows are held, every team's (0 before the first read). */
  size(): number;
  /** Every team's rows as the store has them now (frozen: do not mutate). */
  all(): SandboxRow[];
}

/** Sorts as E2B's desc order: newest first, equal starts by sandbox ID ascending. */
export function byStartDesc(a: ListedRow, b: ListedRow): number {
  return b.ts - a.ts || (a.row.id < b.row.id ? -1 : a.row.id > b.row.id ? 1 : 0);
}

/** IDs touched between two reads past which the mirror is dropped whole (and read again at the next list). */
const MAX_DIRTY = 1024;

/** A mirror over `source`, filled at its first read. */
export function createRowMirror(source: RowSource): RowMirror {
  let teams: Map<string, { rows: Map<string, ListedRow>; sorted?: ListedRow[] }> | undefined;
  const where = new Map<string, string>();
  const dirty = new Set<string>();
  const put = (row: SandboxRow) => {
    let team = teams!.get(row.teamID);
    if (!team) teams!.set(row.teamID, (team = { rows: new Map() }));
    team.rows.set(row.id, { row: Object.freeze(row), ts: Date.parse(row.startedAt) });
    team.sorted = undefined;
    where.set(row.id, row.teamID);
  };
  const drop = (id: string) => {
    const teamID = where.get(id);
    if (teamID === undefined) return;
    where.delete(id);
    const team = teams!.get(teamID)!;
    team.rows.delete(id);
    team.sorted = undefined;
    if (team.rows.size === 0) teams!.delete(teamID);
  };
  const settle = () => {
    if (!teams) {
      teams = new Map();
      dirty.clear();
      for (const row of source.all()) put(row);
      return;
    }
    for (const id of dirty) {
      drop(id);
      const row = source.get(id);
      if (row) put(row);
    }
    dirty.clear();
  };
  return {
    touch(id) {
      if (!teams) return;
      dirty.add(id);
      if (dirty.size <= MAX_DIRTY) return;
      teams = undefined;
      where.clear();
      dirty.clear();
    },
    sorted(teamID) {
      settle();
      const team = teams!.get(teamID);
      if (!team) return [];
      team.sorted ??= [...team.rows.values()].sort(byStartDesc);
      return team.sorted;
    },
    size() {
      if (!teams) return 0;
      settle();
      return where.size;
    },
    all() {
      settle();
      const out: SandboxRow[] = [];
      for (const team of teams!.values()) for (const { row } of team.rows.values()) out.push(row);
      return out;
    },
  };
}

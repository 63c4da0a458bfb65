import type { DatabaseSync } from "node:sqlite";

/** Seconds one raw sample covers (the sampler's period). */
export const RAW_RES = 5;
/** Seconds one compacted row covers. */
export const COMPACT_RES = 300;

/** One bucket of a team's series: the gauge's max, the started sum, and the widest row resolution in it. */
export interface TeamBucket {
  /** Bucket start, unix seconds. */
  ts: number;
  concurrent: number;
  started: number;
  res: number;
}

/** The team_samples table: a gauge (live sandboxes) and a counter (sandboxes started) per team and tick. */
export interface TeamMetrics {
  /** Records one tick of a team (unix seconds); a second record at the same ts keeps the max gauge and adds the starts. */
  record(teamID: string, ts: number, concurrent: number, started: number): void;
  /** Live (starting or running) sandboxes per team, for teams that have any. */
  liveByTeam(): Map<string, number>;
  /** The team's rows in [start, end] grouped by `step`-second buckets, ascending; only buckets with rows. */
  buckets(teamID: string, start: number, end: number, step: number): TeamBucket[];
  /** The raw sample with the highest gauge in [start, end] (the earliest on a tie). */
  maxConcurrent(teamID: string, start: number, end: number): { ts: number; value: number } | undefined;
  /**
   * Folds raw rows older than `before` (unix seconds, rounded down to a COMPACT_RES boundary) into
   * one row per team and COMPACT_RES: max gauge, summed starts. Returns how many raw rows went.
   */
  compact(before: number): number;
  /** Deletes every row older than `before`. */
  prune(before: number): number;
  /** Row count (all resolutions), for tests and the health figures. */
  count(): number;
}

/** The team_samples table. */
export function teamMetricsTable(db: DatabaseSync): TeamMetrics {
  const upsert = db.prepare(`INSERT INTO team_samples (team_id, ts, res, concurrent, started) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (team_id, ts, res) DO UPDATE SET concurrent = max(concurrent, excluded.concurrent), started = started + excluded.started`);
  const live = db.prepare("SELECT team_id, count(*) AS n FROM sandboxes WHERE state IN ('starting', 'running') GROUP BY team_id");
  const buckets = db.prepare(`SELECT (ts / CAST(?1 AS INTEGER)) * CAST(?1 AS INTEGER) AS b, max(concurrent) AS c, sum(started) AS s, max(res) AS r
    FROM team_samples WHERE team_id = ?2 AND ts >= ?3 AND ts <= ?4 GROUP BY b ORDER BY b`);
  const maxC = db.prepare(`SELECT ts, concurrent FROM team_samples WHERE team_id = ? AND ts >= ? AND ts <= ?
    ORDER BY concurrent DESC, ts ASC LIMIT 1`);
  const fold = db.prepare(`INSERT INTO team_samples (team_id, ts, res, concurrent, started)
    SELECT team_id, (ts / ${COMPACT_RES}) * ${COMPACT_RES}, ${COMPACT_RES}, max(concurrent), sum(started)
    FROM team_samples WHERE res < ${COMPACT_RES} AND ts < ? GROUP BY team_id, (ts / ${COMPACT_RES}) * ${COMPACT_RES}
    ON CONFLICT (team_id, ts, res) DO UPDATE SET concurrent = max(concurrent, excluded.concurrent), started = started + excluded.started`);
  const dropRaw = db.prepare(`DELETE FROM team_samples WHERE res < ${COMPACT_RES} AND ts < ?`);
  const prune = db.prepare("DELETE FROM team_samples WHERE ts < ?");
  const count = db.prepare("SELECT count(*) AS n FROM team_samples");
  const int = (v: unknown) => Number(v);
  return {
    record: (teamID, ts, concurrent, started) => void upsert.run(teamID, Math.floor(ts), RAW_RES, concurrent, started),
    liveByTeam: () => new Map((live.all() as { team_id: string; n: number }[]).map((r) => [r.team_id, int(r.n)])),
    buckets: (teamID, start, end, step) =>
      (buckets.all(step, teamID, start, end) as { b: number; c: number; s: number; r: number }[]).map((r) => ({ ts: int(r.b), concurrent: int(r.c), started: int(r.s), res: int(r.r) })),
    maxConcurrent(teamID, start, end) {
      const r = maxC.get(teamID, start, end) as { ts: number; concurrent: number } | undefined;
      return r && { ts: int(r.ts), value: int(r.concurrent) };
    },
    compact(before) {
      const cut = Math.floor(before / COMPACT_RES) * COMPACT_RES;
      db.exec("BEGIN IMMEDIATE");
      try {
        fold.run(cut);
        const n = int(dropRaw.run(cut).changes);
        db.exec("COMMIT");
        return n;
      } catch (err) {
        db.exec("ROLLBACK");
        throw err;
      }
    },
    prune: (before) => int(prune.run(Math.floor(before)).changes),
    count: () => int((count.get() as { n: number }).n),
  };
}

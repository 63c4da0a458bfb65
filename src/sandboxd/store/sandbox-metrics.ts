import type { DatabaseSync } from "node:sqlite";

/** One envd /metrics reading of a sandbox, taken by sandboxd at `ts` (unix seconds). */
export interface SandboxSample {
  ts: number;
  cpuCount: number;
  cpuUsedPct: number;
  memUsed: number;
  memTotal: number;
  memCache: number;
  diskUsed: number;
  diskTotal: number;
}

/** The sandbox_samples table. */
export interface SandboxMetrics {
  record(sandboxID: string, teamID: string, s: SandboxSample): void;
  /** A sandbox's samples in [start, end], ascending. */
  range(sandboxID: string, start: number, end: number): SandboxSample[];
  /** The newest sample of a sandbox. */
  latest(sandboxID: string): SandboxSample | undefined;
  /** Deletes samples older than `before`, and those of sandboxes no longer in the store. */
  prune(before: number): number;
}

interface Row {
  ts: number;
  cpu_count: number;
  cpu_used_pct: number;
  mem_used: number;
  mem_total: number;
  mem_cache: number;
  disk_used: number;
  disk_total: number;
}

const fromRow = (r: Row): SandboxSample => ({
  ts: Number(r.ts), cpuCount: Number(r.cpu_count), cpuUsedPct: Number(r.cpu_used_pct), memUsed: Number(r.mem_used), memTotal: Number(r.mem_total),
  memCache: Number(r.mem_cache), diskUsed: Number(r.disk_used), diskTotal: Number(r.disk_total),
});

/** The sandbox_samples table. */
export function sandboxMetricsTable(db: DatabaseSync): SandboxMetrics {
  const insert = db.prepare(`INSERT OR REPLACE INTO sandbox_samples (sandbox_id, team_id, ts, cpu_count, cpu_used_pct, mem_used, mem_total, mem_cache, disk_used, disk_total)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const range = db.prepare("SELECT * FROM sandbox_samples WHERE sandbox_id = ? AND ts >= ? AND ts <= ? ORDER BY ts");
  const latest = db.prepare("SELECT * FROM sandbox_samples WHERE sandbox_id = ? ORDER BY ts DESC LIMIT 1");
  const old = db.prepare("DELETE FROM sandbox_samples WHERE ts < ?");
  const gone = db.prepare("DELETE FROM sandbox_samples WHERE sandbox_id NOT IN (SELECT id FROM sandboxes)");
  return {
    record: (id, teamID, s) =>
      void insert.run(id, teamID, Math.floor(s.ts), s.cpuCount, s.cpuUsedPct, s.memUsed, s.memTotal, s.memCache, s.diskUsed, s.diskTotal),
    range: (id, start, end) => (range.all(id, start, end) as unknown as Row[]).map(fromRow),
    latest(id) {
      const r = latest.get(id) as Row | undefined;
      return r && fromRow(r);
    },
    prune: (before) => Number(old.run(Math.floor(before)).changes) + Number(gone.run().changes),
  };
}

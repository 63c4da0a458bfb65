import type { DatabaseSync } from "node:sqlite";

/** Schema steps in order; `PRAGMA user_version` records how many have run, so each runs once. */
const MIGRATIONS: string[] = [
  `CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
   CREATE TABLE teams (
     id TEXT PRIMARY KEY, name TEXT NOT NULL,
     max_concurrent INTEGER NOT NULL DEFAULT 100, max_length_hours INTEGER NOT NULL DEFAULT 24);
   CREATE TABLE api_keys (
     hash TEXT PRIMARY KEY, masked TEXT NOT NULL,
     team_id TEXT NOT NULL REFERENCES teams(id), created_at TEXT NOT NULL);
   CREATE TABLE templates (
     id TEXT PRIMARY KEY, alias TEXT, team_id TEXT NOT NULL REFERENCES teams(id),
     cpu_count INTEGER NOT NULL DEFAULT 2, memory_mb INTEGER NOT NULL DEFAULT 512, disk_mb INTEGER NOT NULL,
     envd_version TEXT NOT NULL, default_user TEXT, default_workdir TEXT,
     rootfs TEXT NOT NULL, build_id TEXT NOT NULL,
     created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
     spawn_count INTEGER NOT NULL DEFAULT 0, last_spawned_at TEXT);
   CREATE UNIQUE INDEX templates_alias ON templates(alias) WHERE alias IS NOT NULL;
   CREATE TABLE sandboxes (
     id TEXT PRIMARY KEY, team_id TEXT NOT NULL REFERENCES teams(id), template_id TEXT NOT NULL,
     state TEXT NOT NULL CHECK (state IN ('starting', 'running', 'paused')),
     started_at TEXT NOT NULL, end_at TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}',
     auto_pause INTEGER NOT NULL DEFAULT 0, secure INTEGER NOT NULL DEFAULT 0,
     traffic_token TEXT, network TEXT NOT NULL DEFAULT '{}', allow_internet_access INTEGER NOT NULL DEFAULT 1,
     ip TEXT, envd_port INTEGER, envd_version TEXT NOT NULL,
     cpu_count INTEGER NOT NULL, memory_mb INTEGER NOT NULL, disk_mb INTEGER NOT NULL);
   CREATE INDEX sandboxes_team ON sandboxes(team_id, state);`,
  // Team metrics (res: seconds one row covers, 5 raw, 300 compacted) and envd's per-sandbox samples.
  `CREATE TABLE team_samples (
     team_id TEXT NOT NULL, ts INTEGER NOT NULL, res INTEGER NOT NULL,
     concurrent INTEGER NOT NULL, started INTEGER NOT NULL,
     PRIMARY KEY (team_id, ts, res)) WITHOUT ROWID;
   CREATE TABLE sandbox_samples (
     sandbox_id TEXT NOT NULL, team_id TEXT NOT NULL, ts INTEGER NOT NULL,
     cpu_count INTEGER NOT NULL, cpu_used_pct REAL NOT NULL, mem_used INTEGER NOT NULL, mem_total INTEGER NOT NULL,
     mem_cache INTEGER NOT NULL, disk_used INTEGER NOT NULL, disk_total INTEGER NOT NULL,
     PRIMARY KEY (sandbox_id, ts)) WITHOUT ROWID;
   CREATE INDEX sandbox_samples_ts ON sandbox_samples(ts);`,
  // Template builds, their logs and tags; what a template starts sandboxes with.
  `ALTER TABLE templates ADD COLUMN start_cmd TEXT;
   ALTER TABLE templates ADD COLUMN ready_cmd TEXT;
   ALTER TABLE templates ADD COLUMN envs TEXT;
   CREATE TABLE template_builds (
     id TEXT PRIMARY KEY, template_id TEXT NOT NULL,
     status TEXT NOT NULL CHECK (status IN ('waiting', 'building', 'ready', 'error')),
     reason TEXT, spec TEXT, cpu_count INTEGER NOT NULL, memory_mb INTEGER NOT NULL,
     rootfs TEXT, envd_version TEXT, default_user TEXT, default_workdir TEXT, start_cmd TEXT, ready_cmd TEXT, envs TEXT,
     created_at TEXT NOT NULL, updated_at TEXT NOT NULL, finished_at TEXT);
   CREATE INDEX template_builds_template ON template_builds(template_id, created_at);
   CREATE TABLE build_logs (
     build_id TEXT NOT NULL, seq INTEGER NOT NULL, timestamp TEXT NOT NULL, level TEXT NOT NULL,
     message TEXT NOT NULL, step TEXT, PRIMARY KEY (build_id, seq));
   CREATE TABLE template_tags (
     template_id TEXT NOT NULL, tag TEXT NOT NULL, build_id TEXT NOT NULL, PRIMARY KEY (template_id, tag));`,
  // A paused sandbox that traffic through the proxy resumes (lifecycle autoResume).
  `ALTER TABLE sandboxes ADD COLUMN auto_resume INTEGER NOT NULL DEFAULT 0;`,
  // api-keys-and-access-tokens: a name and last use per API key, and access tokens in the same table.
  `ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT 'Default API Key';
   ALTER TABLE api_keys ADD COLUMN last_used TEXT;
   ALTER TABLE api_keys ADD COLUMN kind TEXT NOT NULL DEFAULT 'api_key' CHECK (kind IN ('api_key', 'access_token'));
   CREATE INDEX api_keys_team ON api_keys(team_id, kind);`,
  // A template its team published: every team may start sandboxes from it and build on it.
  `ALTER TABLE templates ADD COLUMN public INTEGER NOT NULL DEFAULT 0;`,
  // Snapshots of sandbox disks, and what a sandbox needs to start again on its own disk or a copy
  // of it: its build's rootfs, the variables its envd got, and whether a pause keeps memory.
  `CREATE TABLE snapshots (
     id TEXT PRIMARY KEY, team_id TEXT NOT NULL REFERENCES teams(id), name TEXT,
     source_sandbox_id TEXT NOT NULL, template_id TEXT NOT NULL, build_id TEXT NOT NULL,
     image TEXT NOT NULL, template TEXT NOT NULL, size_bytes INTEGER NOT NULL, created_at TEXT NOT NULL);
   CREATE UNIQUE INDEX snapshots_name ON snapshots(team_id, name) WHERE name IS NOT NULL;
   CREATE INDEX snapshots_team ON snapshots(team_id, created_at);
   ALTER TABLE sandboxes ADD COLUMN build_id TEXT;
   ALTER TABLE sandboxes ADD COLUMN rootfs TEXT;
   ALTER TABLE sandboxes ADD COLUMN env_vars TEXT;
   ALTER TABLE sandboxes ADD COLUMN auto_pause_memory INTEGER NOT NULL DEFAULT 1;
   ALTER TABLE sandboxes ADD COLUMN on_disk INTEGER NOT NULL DEFAULT 0;`,
  // An operation under way on a sandbox that a crash must undo (a snapshot's copy, a cold start),
  // and the snapshot image it is making.
  `ALTER TABLE sandboxes ADD COLUMN transition TEXT CHECK (transition IN ('snapshotting', 'resuming'));
   ALTER TABLE sandboxes ADD COLUMN transition_image TEXT;`,
];

/** How many schema steps there are: the `user_version` of an up-to-date store. */
export const MIGRATION_COUNT = MIGRATIONS.length;

/** Brings the schema to the latest version inside one transaction per step. */
export function migrate(db: DatabaseSync): number {
  const current = Number((db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version);
  if (current > MIGRATIONS.length) throw new Error(`the store's schema version ${current} is newer than this sandboxd knows (${MIGRATIONS.length})`);
  for (let v = current; v < MIGRATIONS.length; v++) {
    db.exec("BEGIN IMMEDIATE");
    try {
      db.exec(MIGRATIONS[v]);
      db.exec(`PRAGMA user_version = ${v + 1}`);
      db.exec("COMMIT");
    } catch (err) {
      db.exec("ROLLBACK");
      throw err;
    }
  }
  return MIGRATIONS.length;
}

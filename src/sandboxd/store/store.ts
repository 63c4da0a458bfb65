import { chmodSync, closeSync, existsSync, openSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import { apiKeysTable, type ApiKeys } from "./api-keys.js";
import { buildsTable, type Builds } from "./builds.js";
import { migrate } from "./migrations.js";
import { sandboxesTable, type Sandboxes } from "./sandboxes.js";
import { sandboxMetricsTable, type SandboxMetrics } from "./sandbox-metrics.js";
import { settingsTable, type Settings } from "./settings.js";
import { snapshotsTable, type Snapshots } from "./snapshots.js";
import { teamMetricsTable, type TeamMetrics } from "./team-metrics.js";
import { teamsTable, type Teams } from "./teams.js";
import { templatesTable, type Templates } from "./templates.js";

/** sandboxd's durable state: one SQLite file, one table module each. */
export interface Store {
  teams: Teams;
  apiKeys: ApiKeys;
  templates: Templates;
  builds: Builds;
  sandboxes: Sandboxes;
  settings: Settings;
  teamMetrics: TeamMetrics;
  sandboxMetrics: SandboxMetrics;
  snapshots: Snapshots;
  /** Runs `fn` in one transaction (rolled back if it throws). */
  transaction<T>(fn: () => T): T;
  close(): void;
}

/**
 * Makes the store's file, and its WAL and shared-memory files where they exist, readable by root
 * only: it holds the install secret every access token derives from. SQLite gives the files it
 * makes later the database file's own mode.
 */
function restrictStoreFiles(file: string): void {
  closeSync(openSync(file, "a", 0o600));
  for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) if (existsSync(f)) chmodSync(f, 0o600);
}

/** Opens (creating it if needed) the store at `file` (mode 0600), in WAL mode, migrated to the latest schema. */
export function openStore(file: string): Store {
  restrictStoreFiles(file);
  const db = new DatabaseSync(file);
  try {
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA foreign_keys = ON");
    db.exec("PRAGMA busy_timeout = 5000");
    migrate(db);
  } catch (err) {
    db.close();
    throw err;
  }
  return {
    teams: teamsTable(db),
    apiKeys: apiKeysTable(db),
    templates: templatesTable(db),
    builds: buildsTable(db),
    sandboxes: sandboxesTable(db),
    settings: settingsTable(db),
    teamMetrics: teamMetricsTable(db),
    sandboxMetrics: sandboxMetricsTable(db),
    snapshots: snapshotsTable(db),
    transaction(fn) {
      db.exec("BEGIN IMMEDIATE");
      try {
        const out = fn();
        db.exec("COMMIT");
        return out;
      } catch (err) {
        db.exec("ROLLBACK");
        throw err;
      }
    },
    close: () => db.close(),
  };
}

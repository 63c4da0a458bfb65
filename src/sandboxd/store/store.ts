import { DatabaseSync } from "node:sqlite";
import { apiKeysTable, type ApiKeys } from "./api-keys.js";
import { buildsTable, type Builds } from "./builds.js";
import { migrate } from "./migrations.js";
import { sandboxesTable, type Sandboxes } from "./sandboxes.js";
import { sandboxMetricsTable, type SandboxMetrics } from "./sandbox-metrics.js";
import { settingsTable, type Settings } from "./settings.js";
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
  /** Runs `fn` in one transaction (rolled back if it throws). */
  transaction<T>(fn: () => T): T;
  close(): void;
}

/** Opens (creating it if needed) the store at `file`, in WAL mode, migrated to the latest schema. */
export function openStore(file: string): Store {
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

import type { DatabaseSync } from "node:sqlite";

/** Key/value settings of this installation (the install secret lives here). */
export interface Settings {
  get(key: string): string | undefined;
  set(key: string, value: string): void;
}

/** The settings table. */
export function settingsTable(db: DatabaseSync): Settings {
  const get = db.prepare("SELECT value FROM settings WHERE key = ?");
  const set = db.prepare("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  return {
    get: (key) => (get.get(key) as { value: string } | undefined)?.value,
    set: (key, value) => void set.run(key, value),
  };
}

import { createHash } from "node:crypto";
import type { DatabaseSync } from "node:sqlite";

/** The SHA-256 hex of a key: all the store keeps of it. */
export function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** What is shown of a key in place of it: its prefix and last four characters. */
export function maskKey(key: string): string {
  return `${key.slice(0, 8)}…${key.slice(-4)}`;
}

/** The api_keys table. */
export interface ApiKeys {
  /** Stores a key hashed, for a team. */
  add(key: string, teamID: string): void;
  /** The team that owns a key, if any. */
  teamOf(key: string): string | undefined;
  count(): number;
}

/** The api_keys table. */
export function apiKeysTable(db: DatabaseSync): ApiKeys {
  const add = db.prepare("INSERT INTO api_keys (hash, masked, team_id, created_at) VALUES (?, ?, ?, ?)");
  const find = db.prepare("SELECT team_id FROM api_keys WHERE hash = ?");
  const count = db.prepare("SELECT count(*) AS n FROM api_keys");
  return {
    add: (key, teamID) => void add.run(hashKey(key), maskKey(key), teamID, new Date().toISOString()),
    teamOf: (key) => (find.get(hashKey(key)) as { team_id: string } | undefined)?.team_id,
    count: () => Number((count.get() as { n: number }).n),
  };
}

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
  /** Every key as the store knows it: ID (a prefix of its hash), masked form, team, creation time. */
  list(): KeyInfo[];
  /** Deletes the keys whose ID or full key is `ref`; returns how many went (0: none matched). */
  revoke(ref: string): number;
}

/** What is shown of a stored key. */
export interface KeyInfo {
  id: string;
  masked: string;
  teamID: string;
  createdAt: string;
}

/** Characters of the hash that name a key in `keys list` and `keys revoke`. */
export const KEY_ID_LENGTH = 12;

/** The api_keys table. */
export function apiKeysTable(db: DatabaseSync): ApiKeys {
  const add = db.prepare("INSERT INTO api_keys (hash, masked, team_id, created_at) VALUES (?, ?, ?, ?)");
  const find = db.prepare("SELECT team_id FROM api_keys WHERE hash = ?");
  const count = db.prepare("SELECT count(*) AS n FROM api_keys");
  const list = db.prepare("SELECT hash, masked, team_id, created_at FROM api_keys ORDER BY created_at, hash");
  const revoke = db.prepare("DELETE FROM api_keys WHERE substr(hash, 1, ?) = ?");
  return {
    add: (key, teamID) => void add.run(hashKey(key), maskKey(key), teamID, new Date().toISOString()),
    teamOf: (key) => (find.get(hashKey(key)) as { team_id: string } | undefined)?.team_id,
    count: () => Number((count.get() as { n: number }).n),
    list: () =>
      (list.all() as { hash: string; masked: string; team_id: string; created_at: string }[]).map((r) => ({
        id: r.hash.slice(0, KEY_ID_LENGTH), masked: r.masked, teamID: r.team_id, createdAt: r.created_at,
      })),
    revoke(ref) {
      const hash = ref.startsWith("e2b_") ? hashKey(ref) : ref.toLowerCase();
      if (!/^[0-9a-f]+$/.test(hash) || hash.length < KEY_ID_LENGTH) return 0;
      return Number(revoke.run(hash.length, hash).changes);
    },
  };
}

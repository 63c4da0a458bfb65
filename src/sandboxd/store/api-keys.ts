import { createHash, randomBytes } from "node:crypto";
import type { DatabaseSync } from "node:sqlite";

/** The SHA-256 hex of a key: all the store keeps of it. */
export function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}


/** The two kinds of team credential: API keys (X-API-Key) and access tokens (Authorization: Bearer). */
export type CredentialKind = "api_key" | "access_token";

/** The prefix of each kind, as E2B's (`e2b_…` keys, `sk_e2b_…` tokens). */
export const CREDENTIAL_PREFIX: Record<CredentialKind, string> = { api_key: "e2b_", access_token: "sk_e2b_" };

/** What is shown of a key or token in place of it: its prefix, then its first and last four characters. */
export function maskKey(key: string): string {
  const prefix = key.startsWith(CREDENTIAL_PREFIX.access_token) ? CREDENTIAL_PREFIX.access_token : CREDENTIAL_PREFIX.api_key;
  return `${key.slice(0, prefix.length + 4)}…${key.slice(-4)}`;
}

/** Hex characters after the prefix: 20 random bytes, as E2B's keys and tokens. */
const SECRET_HEX = 40;

/** A new random credential of a kind (shown once by whoever makes it; only its hash is stored). */
export function newCredential(kind: CredentialKind): string {
  return CREDENTIAL_PREFIX[kind] + randomBytes(SECRET_HEX / 2).toString("hex");
}

/** E2B's IdentifierMaskingDetails: the prefix, the secret's length and its first 2 and last 4 characters. */
export interface MaskDetails {
  prefix: string;
  valueLength: number;
  maskedValuePrefix: string;
  maskedValueSuffix: string;
}

/** What is shown of a stored credential. */
export interface KeyInfo {
  /** The 12 hex characters that name it in the admin CLI (a prefix of its hash). */
  id: string;
  /** Its ID in the API: the first 128 bits of its hash, written as a UUID. */
  apiID: string;
  name: string;
  masked: string;
  mask: MaskDetails;
  teamID: string;
  createdAt: string;
  lastUsed: string | null;
}

/** The api_keys table: the teams' API keys and access tokens, hashed. */
export interface ApiKeys {
  /** Stores an API key hashed, for a team. */
  add(key: string, teamID: string): void;
  /** Stores a credential hashed under a name; returns what is shown of it. */
  create(kind: CredentialKind, secret: string, teamID: string, name: string): KeyInfo;
  /** The team that owns an API key, if any (its last use is recorded, at most once a minute). */
  teamOf(key: string): string | undefined;
  /** The team that owns an access token, if any. */
  teamOfToken(token: string): string | undefined;
  /** How many API keys there are. */
  count(): number;
  /** Every API key as the store knows it, oldest first. */
  list(): KeyInfo[];
  /** A team's credentials of one kind, oldest first. */
  listTeam(teamID: string, kind: CredentialKind): KeyInfo[];
  /** Renames a team's credential by its API ID; false when the team has none such. */
  rename(teamID: string, kind: CredentialKind, apiID: string, name: string): boolean;
  /** Deletes a team's credential by its API ID; false when the team has none such. */
  remove(teamID: string, kind: CredentialKind, apiID: string): boolean;
  /** Deletes the API keys whose ID (CLI or API) or full key is `ref`; returns how many went (0: none matched). */
  revoke(ref: string): number;
}

/** Characters of the hash that name a key in `keys list` and `keys revoke`. */
export const KEY_ID_LENGTH = 12;

/** The API ID of a hash: its first 32 hex characters as a UUID. */
function apiIdOf(hash: string): string {
  return `${hash.slice(0, 8)}-${hash.slice(8, 12)}-${hash.slice(12, 16)}-${hash.slice(16, 20)}-${hash.slice(20, 32)}`;
}

/** The hash prefix an API ID names, or undefined when it is not one. */
function hashPrefixOf(apiID: string): string | undefined {
  const hex = apiID.toLowerCase().replace(/-/g, "");
  return /^[0-9a-f]{32}$/.test(hex) && /^[0-9a-f-]{32,36}$/i.test(apiID) ? hex : undefined;
}

interface Row {
  hash: string;
  masked: string;
  name: string;
  kind: CredentialKind;
  team_id: string;
  created_at: string;
  last_used: string | null;
}

/** How often a key's last use is written (a write per request would serialize the API on SQLite). */
const LAST_USED_RESOLUTION_MS = 60_000;

const infoOf = (r: Row): KeyInfo => {
  const prefix = CREDENTIAL_PREFIX[r.kind];
  const [head, tail] = r.masked.split("…");
  return {
    id: r.hash.slice(0, KEY_ID_LENGTH),
    apiID: apiIdOf(r.hash),
    name: r.name,
    masked: r.masked,
    mask: { prefix, valueLength: SECRET_HEX, maskedValuePrefix: (head ?? "").slice(prefix.length, prefix.length + 2), maskedValueSuffix: tail ?? "" },
    teamID: r.team_id,
    createdAt: r.created_at,
    lastUsed: r.last_used,
  };
};

/** The api_keys table. */
export function apiKeysTable(db: DatabaseSync): ApiKeys {
  const COLS = "hash, masked, name, kind, team_id, created_at, last_used";
  const insert = db.prepare("INSERT INTO api_keys (hash, masked, team_id, created_at, name, kind) VALUES (?, ?, ?, ?, ?, ?)");
  const find = db.prepare("SELECT team_id, last_used FROM api_keys WHERE hash = ? AND kind = ?");
  const touch = db.prepare("UPDATE api_keys SET last_used = ? WHERE hash = ?");
  const count = db.prepare("SELECT count(*) AS n FROM api_keys WHERE kind = 'api_key'");
  const list = db.prepare(`SELECT ${COLS} FROM api_keys WHERE kind = 'api_key' ORDER BY created_at, hash`);
  const listTeam = db.prepare(`SELECT ${COLS} FROM api_keys WHERE team_id = ? AND kind = ? ORDER BY created_at, hash`);
  const rename = db.prepare("UPDATE api_keys SET name = ? WHERE team_id = ? AND kind = ? AND substr(hash, 1, 32) = ?");
  const remove = db.prepare("DELETE FROM api_keys WHERE team_id = ? AND kind = ? AND substr(hash, 1, 32) = ?");
  const revoke = db.prepare("DELETE FROM api_keys WHERE kind = 'api_key' AND substr(hash, 1, ?) = ?");
  const get = db.prepare(`SELECT ${COLS} FROM api_keys WHERE hash = ?`);

  const teamOf = (secret: string, kind: CredentialKind): string | undefined => {
    const hash = hashKey(secret);
    const r = find.get(hash, kind) as { team_id: string; last_used: string | null } | undefined;
    if (!r) return undefined;
    const now = Date.now();
    if (r.last_used === null || now - Date.parse(r.last_used) >= LAST_USED_RESOLUTION_MS) touch.run(new Date(now).toISOString(), hash);
    return r.team_id;
  };

  const create = (kind: CredentialKind, secret: string, teamID: string, name: string): KeyInfo => {
    const hash = hashKey(secret);
    insert.run(hash, maskKey(secret), teamID, new Date().toISOString(), name, kind);
    return infoOf(get.get(hash) as unknown as Row);
  };

  return {
    add: (key, teamID) => void create("api_key", key, teamID, "Default API Key"),
    create,
    teamOf: (key) => teamOf(key, "api_key"),
    teamOfToken: (token) => teamOf(token, "access_token"),
    count: () => Number((count.get() as { n: number }).n),
    list: () => (list.all() as unknown as Row[]).map(infoOf),
    listTeam: (teamID, kind) => (listTeam.all(teamID, kind) as unknown as Row[]).map(infoOf),
    rename(teamID, kind, apiID, name) {
      const prefix = hashPrefixOf(apiID);
      return prefix !== undefined && Number(rename.run(name, teamID, kind, prefix).changes) > 0;
    },
    remove(teamID, kind, apiID) {
      const prefix = hashPrefixOf(apiID);
      return prefix !== undefined && Number(remove.run(teamID, kind, prefix).changes) > 0;
    },
    revoke(ref) {
      const hash = ref.startsWith("e2b_") ? hashKey(ref) : (hashPrefixOf(ref) ?? ref.toLowerCase());
      if (!/^[0-9a-f]+$/.test(hash) || hash.length < KEY_ID_LENGTH) return 0;
      return Number(revoke.run(hash.length, hash).changes);
    },
  };
}

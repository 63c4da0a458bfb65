import { randomBytes } from "node:crypto";
import type { Store } from "./store.js";

/** The team every seeded key and the base template belong to. */
export const DEFAULT_TEAM_ID = "default";
const INSTALL_SECRET = "install_secret";

/** What a first start made; `apiKey` is shown this once and never again (only its hash is kept). */
export type SeedResult = { seeded: true; apiKey: string } | { seeded: false };

/** A random ID of `n` characters of [a-z0-9], like E2B's template and sandbox IDs. */
export function randomId(n: number): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  let out = "";
  while (out.length < n) {
    for (const b of randomBytes(n * 2)) {
      if (b < 252 && out.length < n) out += alphabet[b % 36];
    }
  }
  return out;
}

/** On a fresh store: the default team, its API key and the install secret; a no-op afterwards. */
export function seed(store: Store): SeedResult {
  return store.transaction(() => {
    if (store.teams.get(DEFAULT_TEAM_ID)) return { seeded: false } as const;
    store.teams.insert({ id: DEFAULT_TEAM_ID, name: "default", maxConcurrent: 100, maxLengthHours: 24 });
    const apiKey = "e2b_" + randomBytes(20).toString("hex");
    store.apiKeys.add(apiKey, DEFAULT_TEAM_ID);
    store.settings.set(INSTALL_SECRET, randomBytes(32).toString("hex"));
    return { seeded: true, apiKey } as const;
  });
}

/** The HMAC key sandbox access tokens are derived from (made by seed). */
export function installSecret(store: Store): string {
  const s = store.settings.get(INSTALL_SECRET);
  if (!s) throw new Error("the store has no install secret: it was not seeded");
  return s;
}

/** Registers template "base" for the default team, or points it at a new rootfs/envd version; returns its ID. */
export function registerBaseTemplate(store: Store, opts: { rootfs: string; envdVersion: string; diskSizeMB?: number }): string {
  return store.transaction(() => {
    const existing = store.templates.byAlias("base");
    if (existing) {
      if (existing.rootfs !== opts.rootfs || existing.envdVersion !== opts.envdVersion) store.templates.updateBuild(existing.id, opts.rootfs, opts.envdVersion);
      return existing.id;
    }
    const now = new Date().toISOString();
    const id = randomId(20);
    store.templates.insert({
      id, alias: "base", teamID: DEFAULT_TEAM_ID, cpuCount: 2, memoryMB: 512, diskSizeMB: opts.diskSizeMB ?? 10240, envdVersion: opts.envdVersion,
      defaultUser: "user", defaultWorkdir: "/home/user", rootfs: opts.rootfs, buildID: crypto.randomUUID(), createdAt: now, updatedAt: now,
      spawnCount: 0, lastSpawnedAt: null,
    });
    return id;
  });
}

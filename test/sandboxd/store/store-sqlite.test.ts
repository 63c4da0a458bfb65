import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { hashKey } from "../../../src/sandboxd/store/api-keys.js";
import { MIGRATION_COUNT } from "../../../src/sandboxd/store/migrations.js";
import { DEFAULT_TEAM_ID, installSecret, registerBaseTemplate, seed } from "../../../src/sandboxd/store/seed.js";
import { openStore } from "../../../src/sandboxd/store/store.js";

describe("sandboxd store on a real SQLite file", () => {
  const dir = mkdtempSync(join(tmpdir(), "sandboxd-store-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("a new file is migrated (user_version, WAL) and seeded once; the key is kept only as its hash", () => {
    const file = join(dir, "a.db");
    const store = openStore(file);
    const first = seed(store);
    assert.equal(first.seeded, true);
    const key = first.seeded ? first.apiKey : "";
    assert.match(key, /^e2b_[0-9a-f]{40}$/);
    assert.equal(store.apiKeys.teamOf(key), DEFAULT_TEAM_ID);
    assert.equal(store.apiKeys.teamOf(key.slice(0, -1) + (key.endsWith("0") ? "1" : "0")), undefined);
    assert.deepEqual(seed(store), { seeded: false });
    assert.equal(store.apiKeys.count(), 1);
    assert.match(installSecret(store), /^[0-9a-f]{64}$/);
    store.close();

    const raw = new DatabaseSync(file);
    assert.equal(Number((raw.prepare("PRAGMA user_version").get() as { user_version: number }).user_version), MIGRATION_COUNT);
    assert.equal((raw.prepare("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode, "wal");
    const rows = raw.prepare("SELECT hash, masked FROM api_keys").all() as { hash: string; masked: string }[];
    raw.close();
    assert.equal(rows[0].hash, hashKey(key));
    assert.ok(!rows[0].masked.includes(key.slice(8, -4)), "the masked form hides the key's middle");
    assert.ok(!readFileSync(file).includes(Buffer.from(key)), "the key itself is not in the database file");
  });

  test("reopening keeps teams, templates and sandboxes; base registration is idempotent and follows a new rootfs", () => {
    const file = join(dir, "b.db");
    let store = openStore(file);
    seed(store);
    const id = registerBaseTemplate(store, { rootfs: "/r1", envdVersion: "0.6.13" });
    assert.match(id, /^[a-z0-9]{20}$/);
    store.sandboxes.insert({
      id: "iabc", teamID: DEFAULT_TEAM_ID, templateID: id, state: "running", startedAt: "2026-01-01T00:00:00.000Z", endAt: "2026-01-01T00:05:00.000Z",
      metadata: { a: "b&c=d%" }, autoPause: true, secure: true, trafficToken: null, network: { allowOut: ["1.1.1.1"] }, allowInternetAccess: false,
      ip: "10.0.0.2", envdPort: 49983, envdVersion: "0.6.13", cpuCount: 2, memoryMB: 512, diskSizeMB: 1024,
    });
    store.close();

    store = openStore(file);
    assert.equal(registerBaseTemplate(store, { rootfs: "/r1", envdVersion: "0.6.13" }), id);
    assert.equal(registerBaseTemplate(store, { rootfs: "/r2", envdVersion: "0.6.14" }), id);
    const tpl = store.templates.get(id)!;
    assert.equal(tpl.rootfs, "/r2");
    assert.equal(tpl.envdVersion, "0.6.14");
    assert.equal(tpl.cpuCount, 2);
    assert.equal(tpl.memoryMB, 512);
    const sbx = store.sandboxes.get("iabc")!;
    assert.deepEqual(sbx.metadata, { a: "b&c=d%" });
    assert.equal(sbx.autoPause, true);
    assert.equal(sbx.allowInternetAccess, false);
    assert.deepEqual(sbx.network, { allowOut: ["1.1.1.1"] });
    assert.equal(store.sandboxes.countLive(DEFAULT_TEAM_ID), 1);
    assert.deepEqual(store.teams.get(DEFAULT_TEAM_ID), { id: DEFAULT_TEAM_ID, name: "default", maxConcurrent: 100, maxLengthHours: 24 });
    store.sandboxes.delete("iabc");
    assert.equal(store.sandboxes.get("iabc"), undefined);
    store.close();
  });

  test("a failing transaction leaves nothing; a store newer than this sandboxd is refused", () => {
    const file = join(dir, "c.db");
    const store = openStore(file);
    seed(store);
    assert.throws(() =>
      store.transaction(() => {
        store.teams.insert({ id: "t2", name: "t2", maxConcurrent: 1, maxLengthHours: 1 });
        throw new Error("boom");
      }),
    );
    assert.equal(store.teams.get("t2"), undefined);
    store.close();
    const raw = new DatabaseSync(file);
    raw.exec("PRAGMA user_version = 99");
    raw.close();
    assert.throws(() => openStore(file), /newer than this sandboxd knows/);
  });
});

// The store under the lifecycle's unit tests: a real SQLite store in a scratch directory, seeded
// with the default team and the base template, emptied between tests and removed after the suite.
import { after, afterEach, before } from "node:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { registerBaseTemplate, seed } from "../../../src/sandboxd/store/seed.js";
import { openStore, type Store } from "../../../src/sandboxd/store/store.js";

/**
 * Registers the suite's hooks (call inside `describe`): `ready` gets the store and the base
 * template's ID before the first test; after each test `reset` runs (the suite closes its service
 * there) and every sandbox and snapshot row is deleted; after the suite the store and its
 * directory go.
 */
export function useUnitStore(prefix: string, hooks: { ready(store: Store, templateID: string): void; reset(): Promise<void> | void }): void {
  let dir: string;
  let store: Store;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), prefix));
    store = openStore(join(dir, "sandboxd.db"));
    seed(store);
    hooks.ready(store, registerBaseTemplate(store, { rootfs: join(dir, "rootfs"), envdVersion: "0.6.13" }));
  });
  afterEach(async () => {
    await hooks.reset();
    for (const r of store.sandboxes.all()) store.sandboxes.delete(r.id);
    for (const s of store.snapshots.all()) store.snapshots.delete(s.id);
  });
  after(() => {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });
}

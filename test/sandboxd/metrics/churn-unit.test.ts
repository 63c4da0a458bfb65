import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createJsonLogger } from "../../../src/common/log.js";
import { createEnvdPoller } from "../../../src/sandboxd/metrics/envd-poller.js";
import { createSandboxService, type SandboxService } from "../../../src/sandboxd/sandboxes/service.js";
import { DEFAULT_TEAM_ID, registerBaseTemplate, seed } from "../../../src/sandboxd/store/seed.js";
import { openStore, type Store } from "../../../src/sandboxd/store/store.js";
import { FakeRuntime, fakeEnvd } from "../helpers/fake-runtime.js";

const log = createJsonLogger({ level: "silent", fd: 2, name: "test" });
const TEAM = DEFAULT_TEAM_ID;

describe("created-then-killed sandboxes leave nothing keyed by their ID in sandboxd", () => {
  let dir: string;
  let store: Store;
  let rt: FakeRuntime;
  let svc: SandboxService;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "churn-unit-"));
    store = openStore(join(dir, "sandboxd.db"));
    seed(store);
    const templateID = registerBaseTemplate(store, { rootfs: join(dir, "rootfs"), envdVersion: "0.6.13" });
    rt = new FakeRuntime();
    svc = createSandboxService({ store, runtime: rt, log, envd: fakeEnvd().connect, defaultTemplateID: templateID, budget: { host: {}, team: {}, maxSandboxMemoryMB: 8192 } });
  });
  after(async () => {
    await svc.close();
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("rounds of create, list, metrics poll and kill: the index, the lists, the egress map and the poller's targets end empty", async () => {
    const envd = fakeEnvd();
    const poller = createEnvdPoller({ store, log, envd: envd.connect, rows: () => svc.rows.all() });
    const seen: { id: string; ip: string }[] = [];
    for (let round = 0; round < 20; round++) {
      const batch = [];
      for (let i = 0; i < 3; i++) batch.push((await svc.create(TEAM, { templateID: "base", timeout: 300, secure: true, metadata: { round: String(round) } })).sandboxID as string);
      assert.equal(svc.listV2(TEAM, { states: ["running", "paused"], metadata: [], order: "desc", limit: 100 }).items.length, 3);
      await poller.poll();
      for (const id of batch) {
        assert.equal(poller.health(id)?.up, true);
        seen.push({ id, ip: rt.sandboxes.get(id)!.addr.ip });
      }
      await svc.pause(TEAM, batch[0]);
      for (const id of batch) await svc.kill(TEAM, id);
      await poller.poll();
    }
    assert.equal(svc.index.size(), 0, "the proxy's index");
    assert.equal(svc.rows.size(), 0, "the in-memory rows the lists and the poller read");
    assert.equal(poller.stats().rounds, 40);
    assert.deepEqual(svc.listV1(TEAM, []), []);
    assert.deepEqual(svc.listV2(TEAM, { states: ["running", "paused"], metadata: [], order: "desc", limit: 100 }), { items: [], nextToken: undefined, totalRunning: 0 });
    assert.equal(store.sandboxes.all().length, 0, "the store's rows");
    assert.equal(rt.sandboxes.size, 0, "the runtime's sandboxes");
    for (const { id, ip } of seen) {
      assert.equal(svc.egressOf(ip), undefined, `the egress rules of ${ip}`);
      assert.equal(poller.health(id), undefined, `the poller's target for ${id}`);
      assert.equal(poller.latest(id), undefined);
    }
    assert.deepEqual(svc.pool.stats().ready, []);
    poller.stop();
  });
});

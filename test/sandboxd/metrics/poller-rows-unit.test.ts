import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createJsonLogger } from "../../../src/common/log.js";
import { createEnvdPoller } from "../../../src/sandboxd/metrics/envd-poller.js";
import { prometheusText } from "../../../src/sandboxd/metrics/prometheus.js";
import { createMetrics } from "../../../src/sandboxd/metrics/service.js";
import { createSandboxService, type SandboxService } from "../../../src/sandboxd/sandboxes/service.js";
import { DEFAULT_TEAM_ID } from "../../../src/sandboxd/store/seed.js";
import type { Store } from "../../../src/sandboxd/store/store.js";
import { FakeRuntime, fakeEnvd } from "../helpers/fake-runtime.js";
import { useUnitStore } from "../helpers/unit-store.js";

const log = createJsonLogger({ level: "silent", fd: 2, name: "test" });
const TEAM = DEFAULT_TEAM_ID;

describe("the envd poller and the Prometheus text read the lifecycle's in-memory rows, not the store", () => {
  let store: Store;
  let svc: SandboxService;
  /** Reads of every row from the store since the counter was last zeroed. */
  let reads = 0;

  // declared before the store's hooks: the service closes before the store does
  after(async () => {
    await svc.close();
  });
  useUnitStore("poller-rows-", {
    ready(s, templateID) {
      store = s;
      const all = s.sandboxes.all.bind(s.sandboxes);
      s.sandboxes.all = () => {
        reads++;
        return all();
      };
      svc = createSandboxService({ store: s, runtime: new FakeRuntime(), log, envd: fakeEnvd().connect, defaultTemplateID: templateID, budget: { host: {}, team: {}, maxSandboxMemoryMB: 8192 } });
    },
    reset: () => undefined,
  });

  const create = async () => (await svc.create(TEAM, { templateID: "base", timeout: 300, secure: true, metadata: {} })).sandboxID as string;

  test("rounds of polling follow creates, pauses and kills without reading every row from the store", async () => {
    const poller = createEnvdPoller({ store, log, envd: fakeEnvd().connect, rows: () => svc.rows.all() });
    const metrics = { ...createMetrics({ store, log, retentionS: 3600 }), poller, rows: () => svc.rows.all() };
    const a = await create();
    svc.rows.all(); // the mirror's one fill from the store
    reads = 0;
    await poller.poll();
    assert.equal(poller.health(a)?.up, true);
    const b = await create();
    await poller.poll();
    assert.equal(poller.health(b)?.up, true, "a sandbox created after the mirror was filled is polled");
    assert.ok(poller.latest(b), "and has a reading");
    await svc.pause(TEAM, a);
    await poller.poll();
    assert.equal(poller.health(a), undefined, "a paused sandbox is no longer polled");
    const text = prometheusText(metrics, TEAM);
    assert.match(text, /^sandboxd_team_sandboxes\{team_id="[^"]+",state="running"\} 1$/m);
    assert.match(text, /^sandboxd_team_sandboxes\{team_id="[^"]+",state="paused"\} 1$/m);
    assert.match(text, new RegExp(`^sandboxd_sandbox_envd_up\\{sandbox_id="${b}"\\} 1$`, "m"));
    assert.match(text, /^sandboxd_process_heap_used_bytes \d+$/m);
    await svc.kill(TEAM, a);
    await svc.kill(TEAM, b);
    await poller.poll();
    assert.equal(poller.health(b), undefined, "a killed sandbox is no longer polled");
    assert.doesNotMatch(prometheusText(metrics, TEAM), /sandbox_id=/, "no series of a killed sandbox");
    assert.equal(reads, 0, "reads of every row from the store during the rounds");
    poller.stop();
  });

  test("without a source the poller reads the store (as before the sandbox service exists)", async () => {
    const poller = createEnvdPoller({ store, log, envd: fakeEnvd().connect });
    const id = await create();
    reads = 0;
    await poller.poll();
    assert.equal(poller.health(id)?.up, true);
    assert.equal(reads, 1);
    await svc.kill(TEAM, id);
    poller.stop();
  });
});

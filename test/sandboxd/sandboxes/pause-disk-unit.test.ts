// Pause to disk in the lifecycle on a fake runtime and a manual clock: the container goes and the
// disk stays, memory stops being reserved, a resume cold-starts it under the same ID with the same
// variables and token, a timeout with autoPauseMemory false pauses to disk, onResume 'reboot'
// turns a frozen pause into a cold start, and start-up keeps such sandboxes (and turns a frozen
// one whose processes are gone into one paused to disk).
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { createJsonLogger } from "../../../src/common/log.js";
import { reserved } from "../../../src/sandboxd/sandboxes/budget.js";
import type { CreateInput } from "../../../src/sandboxd/sandboxes/inputs.js";
import { createSandboxService, type SandboxService } from "../../../src/sandboxd/sandboxes/service.js";
import { DEFAULT_TEAM_ID } from "../../../src/sandboxd/store/seed.js";
import type { Store } from "../../../src/sandboxd/store/store.js";
import { useUnitStore } from "../helpers/unit-store.js";
import { FakeRuntime, fakeEnvd, type FakeEnvd } from "../helpers/fake-runtime.js";
import { ManualClock, until } from "../helpers/manual-clock.js";

const log = createJsonLogger({ level: "silent", fd: 2, name: "test" });
const TEAM = DEFAULT_TEAM_ID;
const input = (o: Partial<CreateInput> = {}): CreateInput => ({ templateID: "base", timeout: 300, secure: true, ...o });

describe("pause to disk (fake runtime)", () => {
  let store: Store;
  let templateID: string;
  let rt: FakeRuntime;
  let envd: FakeEnvd;
  let clock: ManualClock;
  let svc: SandboxService;

  const make = () => {
    rt = new FakeRuntime();
    envd = fakeEnvd();
    clock = new ManualClock();
    svc = createSandboxService({ store, runtime: rt, log, clock, envd: envd.connect, defaultTemplateID: templateID, budget: { host: {}, team: {}, maxSandboxMemoryMB: 8192 } });
    return svc;
  };
  const row = (id: string) => store.sandboxes.get(id);

  useUnitStore("pause-disk-unit-", {
    ready: (s, t) => {
      store = s;
      templateID = t;
    },
    reset: async () => {
      await svc?.close();
    },
  });

  test("pause with keepMemory false stops the container and keeps the disk; connect cold-starts it with the same ID, variables and token", async () => {
    make();
    const made = await svc.create(TEAM, input({ envVars: { A: "1" }, metadata: { m: "x" } }));
    const id = made.sandboxID as string;
    await svc.pause(TEAM, id, false);
    assert.deepEqual([row(id)?.state, row(id)?.onDisk, row(id)?.ip], ["paused", true, null]);
    assert.equal(rt.sandboxes.has(id), false, "no container while paused to disk");
    assert.ok(rt.keptDisks.has(id), "its disk is kept");
    assert.equal(svc.index.lookup(id), undefined, "not routed");
    assert.equal(reserved(store.sandboxes.all()).memoryMB, 0, "its memory is not reserved");
    assert.equal(await svc.resumeOnTraffic(id), false, "traffic does not resume a sandbox paused to disk");
    const r = await svc.connect(TEAM, id, 60);
    assert.equal(r.status, 201);
    assert.equal(r.body.sandboxID, id);
    assert.equal(r.body.envdAccessToken, made.envdAccessToken, "the same access token");
    assert.equal(rt.sandboxes.get(id)?.spec.keptDisk, true, "started on its own disk");
    assert.deepEqual(envd.inits.at(-1)!.settings.envVars, { A: "1", E2B_SANDBOX_ID: id, E2B_TEMPLATE_ID: templateID, E2B_SANDBOX: "true" });
    assert.deepEqual([row(id)?.state, row(id)?.onDisk, row(id)?.metadata], ["running", false, { m: "x" }]);
    assert.ok(svc.index.lookup(id), "routed again");
  });

  test("a failed cold start leaves the sandbox paused on its disk", async () => {
    make();
    const id = (await svc.create(TEAM, input())).sandboxID as string;
    await svc.pause(TEAM, id, false);
    rt.onCreate = () => {
      throw new Error("no room");
    };
    await assert.rejects(svc.resume(TEAM, id, 60), /resume sandbox .* from disk: starting the sandbox on its disk failed: no room/);
    assert.deepEqual([row(id)?.state, row(id)?.onDisk], ["paused", true]);
    assert.ok(rt.keptDisks.has(id));
  });

  test("a timeout with autoPause and autoPauseMemory false pauses to disk; onResume 'reboot' cold-starts a frozen pause", async () => {
    make();
    const toDisk = (await svc.create(TEAM, input({ timeout: 10, autoPause: true, autoPauseMemory: false }))).sandboxID as string;
    const frozen = (await svc.create(TEAM, input({ timeout: 10, autoPause: true }))).sandboxID as string;
    svc.startBackground({ evictEveryMs: 250 });
    await clock.advance(11_000);
    await until(() => row(toDisk)?.state === "paused" && row(frozen)?.state === "paused", "both to be paused");
    assert.equal(row(toDisk)?.onDisk, true);
    assert.equal(row(frozen)?.onDisk, false);
    assert.equal(rt.sandboxes.get(frozen)?.status, "paused", "the other is frozen in memory");
    await svc.connect(TEAM, frozen, 60, false);
    assert.equal(rt.count("stop"), 2, "the frozen one was stopped before its cold start");
    assert.equal(rt.sandboxes.get(frozen)?.spec.keptDisk, true);
    assert.equal(row(frozen)?.state, "running");
  });

  test("start-up keeps a sandbox paused to disk, and a frozen one whose processes are gone (host reboot) becomes paused to disk", async () => {
    make();
    const onDisk = (await svc.create(TEAM, input())).sandboxID as string;
    const frozen = (await svc.create(TEAM, input())).sandboxID as string;
    const lost = (await svc.create(TEAM, input())).sandboxID as string;
    await svc.pause(TEAM, onDisk, false);
    await svc.pause(TEAM, frozen);
    await svc.pause(TEAM, lost);
    await svc.close();
    // the host rebooted: no container is left; the frozen one's disk is there, the other's is not
    rt.sandboxes.clear();
    rt.keptDisks.add(frozen);
    const again = createSandboxService({ store, runtime: rt, log, clock, envd: envd.connect, defaultTemplateID: templateID, budget: { host: {}, team: {}, maxSandboxMemoryMB: 8192 } });
    svc = again;
    await again.reconcile();
    assert.deepEqual([row(onDisk)?.state, row(onDisk)?.onDisk], ["paused", true]);
    assert.deepEqual([row(frozen)?.state, row(frozen)?.onDisk, row(frozen)?.ip], ["paused", true, null]);
    assert.equal(row(lost), undefined, "a paused sandbox with neither processes nor disk is gone");
    assert.equal((await again.connect(TEAM, frozen, 30)).status, 201);
    assert.equal(row(frozen)?.state, "running");
  });
});

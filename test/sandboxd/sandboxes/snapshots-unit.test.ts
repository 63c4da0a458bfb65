// Snapshots in the lifecycle on a fake runtime: a snapshot being copied by a create cannot be
// deleted, a failed snapshot leaves nothing, and start-up drops what a crash left half-made.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { createJsonLogger } from "../../../src/common/log.js";
import { statusOf } from "../../../src/sandboxd/api/errors.js";
import type { CreateInput } from "../../../src/sandboxd/sandboxes/inputs.js";
import { createSandboxService, type SandboxService } from "../../../src/sandboxd/sandboxes/service.js";
import { DEFAULT_TEAM_ID } from "../../../src/sandboxd/store/seed.js";
import type { Store } from "../../../src/sandboxd/store/store.js";
import { useUnitStore } from "../helpers/unit-store.js";
import { FakeRuntime, fakeEnvd } from "../helpers/fake-runtime.js";
import { ManualClock } from "../helpers/manual-clock.js";

const log = createJsonLogger({ level: "silent", fd: 2, name: "test" });
const TEAM = DEFAULT_TEAM_ID;
const input = (o: Partial<CreateInput> = {}): CreateInput => ({ templateID: "base", timeout: 300, secure: true, ...o });

describe("snapshots in the lifecycle (fake runtime)", () => {
  let store: Store;
  let templateID: string;
  let rt: FakeRuntime;
  let svc: SandboxService;

  const make = (maxSnapshots = 10) => {
    rt = new FakeRuntime();
    svc = createSandboxService({
      store, runtime: rt, log, clock: new ManualClock(), envd: fakeEnvd().connect, defaultTemplateID: templateID, maxSnapshots,
      budget: { host: {}, team: {}, maxSandboxMemoryMB: 8192 },
    });
    return svc;
  };

  useUnitStore("snapshots-unit-", {
    ready: (s, t) => {
      store = s;
      templateID = t;
    },
    reset: async () => {
      await svc?.close();
    },
  });

  test("a snapshot a create is copying cannot be deleted (409); once the create is done it can, and its image goes", async () => {
    make();
    const id = (await svc.create(TEAM, input())).sandboxID as string;
    const snap = await svc.snapshot(TEAM, id, undefined);
    const image = store.snapshots.all()[0].image;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const creating = new Promise<void>((r) => (started = r));
    rt.onCreate = (spec) => {
      assert.equal(spec.fromSnapshot, image, "the create starts on a copy of the snapshot's image");
      started();
      return held;
    };
    const child = svc.create(TEAM, input({ templateID: snap.snapshotID }));
    await creating;
    await assert.rejects(svc.deleteSnapshot(TEAM, snap.snapshotID), (e: Error) => statusOf(e) === 409 && /in use/.test(e.message));
    release();
    await child;
    assert.equal(await svc.deleteSnapshot(TEAM, snap.snapshotID), true);
    assert.deepEqual(await rt.snapshots(), []);
    assert.equal(await svc.deleteSnapshot(TEAM, snap.snapshotID), false);
  });

  test("a snapshot the runtime fails to take leaves no row and no image, and answers 500", async () => {
    make();
    const id = (await svc.create(TEAM, input())).sandboxID as string;
    rt.snapshot = async () => {
      throw new Error("fsfreeze failed");
    };
    await assert.rejects(svc.snapshot(TEAM, id, "x"), (e: Error) => statusOf(e) === 500 && /fsfreeze failed/.test(e.message));
    assert.deepEqual(store.snapshots.all(), []);
    assert.deepEqual(await rt.snapshots(), []);
  });

  test("start-up removes an image no snapshot names (a crash before the record) and drops a snapshot whose image is gone", async () => {
    make();
    const id = (await svc.create(TEAM, input())).sandboxID as string;
    await svc.snapshot(TEAM, id, "kept");
    await svc.snapshot(TEAM, id, "lost");
    const lost = store.snapshots.byName(TEAM, "lost:default")!;
    rt.snaps.delete(lost.image);
    rt.snaps.set("shalfmade0000000000000", id);
    await svc.reconcile();
    assert.deepEqual(store.snapshots.all().map((s) => s.name), ["kept:default"]);
    assert.deepEqual(await rt.snapshots(), [store.snapshots.all()[0].image]);
  });

  test("the team's quota counts snapshots; naming one again replaces it without counting twice", async () => {
    make(2);
    const id = (await svc.create(TEAM, input())).sandboxID as string;
    const first = await svc.snapshot(TEAM, id, "a");
    await svc.snapshot(TEAM, id, undefined);
    await assert.rejects(svc.snapshot(TEAM, id, undefined), (e: Error) => statusOf(e) === 429);
    const oldImage = store.snapshots.byName(TEAM, "a:default")!.image;
    const again = await svc.snapshot(TEAM, id, "a");
    assert.equal(again.snapshotID, first.snapshotID);
    assert.equal((await rt.snapshots()).includes(oldImage), false, "the replaced copy is removed");
    assert.equal(store.snapshots.countByTeam(TEAM), 2);
  });
});

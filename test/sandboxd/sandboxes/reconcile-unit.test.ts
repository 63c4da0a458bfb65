// The reconcile loop on a fake runtime and a manual clock: a sandbox whose processes die is removed
// at the next pass (not at its timeout) and logged by its ID, a frozen one is kept on its disk, a
// create in flight is left alone; a "crash" (a new lifecycle over the same store and runtime while
// a snapshot, a fork or a cold start hangs) is undone by the start-up pass; the state machine
// refuses moves it does not have.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Logger } from "../../../src/common/log.js";
import type { CreateInput } from "../../../src/sandboxd/sandboxes/inputs.js";
import { createSandboxService, type SandboxService } from "../../../src/sandboxd/sandboxes/service.js";
import { canMove, phaseOf } from "../../../src/sandboxd/sandboxes/state.js";
import type { SandboxRow } from "../../../src/sandboxd/store/sandboxes.js";
import { DEFAULT_TEAM_ID } from "../../../src/sandboxd/store/seed.js";
import type { Store } from "../../../src/sandboxd/store/store.js";
import { useUnitStore } from "../helpers/unit-store.js";
import { FakeRuntime, fakeEnvd, type FakeEnvd } from "../helpers/fake-runtime.js";
import { ManualClock, until } from "../helpers/manual-clock.js";

const TEAM = DEFAULT_TEAM_ID;
const input = (o: Partial<CreateInput> = {}): CreateInput => ({ templateID: "base", timeout: 300, secure: true, ...o });
const never = () => new Promise<void>(() => undefined);

/** A logger that keeps its lines (fields and message) for the test to read. */
function keptLog(): Logger & { lines: { msg: string; fields: Record<string, unknown> }[] } {
  const lines: { msg: string; fields: Record<string, unknown> }[] = [];
  const fn = (a: object | string, b?: string) => void lines.push(typeof a === "string" ? { msg: a, fields: {} } : { msg: b ?? "", fields: a as Record<string, unknown> });
  return { lines, trace: fn, debug: fn, info: fn, warn: fn, error: fn, fatal: fn };
}

describe("the reconcile loop (fake runtime, manual clock)", () => {
  let store: Store;
  let templateID: string;
  let rt: FakeRuntime;
  let envd: FakeEnvd;
  let clock: ManualClock;
  let log: ReturnType<typeof keptLog>;
  let svc: SandboxService;

  /** A lifecycle over the store; `fresh` false keeps the runtime (a restart of sandboxd). */
  const make = (fresh = true) => {
    if (fresh) {
      rt = new FakeRuntime();
      envd = fakeEnvd();
      clock = new ManualClock();
    }
    log = keptLog();
    svc = createSandboxService({ store, runtime: rt, log, clock, envd: envd.connect, defaultTemplateID: templateID, budget: { host: {}, team: {}, maxSandboxMemoryMB: 8192 } });
    return svc;
  };
  const row = (id: string) => store.sandboxes.get(id);
  const listed = () => svc.listV2(TEAM, { states: ["running", "paused"], metadata: [], order: "desc", limit: 100 }).items.map((b) => b.sandboxID);

  useUnitStore("reconcile-unit-", {
    ready: (s, t) => {
      store = s;
      templateID = t;
    },
    reset: async () => {
      rt.onCreate = undefined;
      rt.onSnapshot = undefined;
      await svc?.close();
    },
  });

  test("a running sandbox whose processes die leaves the list at the next pass, long before its timeout, logged by its ID", async () => {
    make();
    const made = await svc.create(TEAM, input({ timeout: 3600 }));
    const dead = made.sandboxID as string;
    const alive = (await svc.create(TEAM, input({ timeout: 3600 }))).sandboxID as string;
    svc.startBackground({ reconcileEveryMs: 2000 });
    await clock.advance(2000);
    assert.deepEqual(listed().sort(), [dead, alive].sort(), "a pass with nothing dead changes nothing");
    rt.die(dead);
    await clock.advance(2000);
    await until(() => row(dead) === undefined, "the dead sandbox to be removed");
    assert.deepEqual(listed(), [alive]);
    assert.equal(rt.sandboxes.has(dead), false, "its leftovers are removed from the runtime");
    assert.equal(svc.index.lookup(dead), undefined, "no longer routed");
    const line = log.lines.find((l) => l.fields.sandboxID === dead && /processes are gone/.test(l.msg));
    assert.ok(line, "the removal is logged with the sandbox's ID");
    assert.equal(JSON.stringify(log.lines).includes(made.envdAccessToken as string), false, "no secret is logged");
    assert.equal(row(alive)?.state, "running");
  });

  test("a pass that fails (the runtime's look throws) is logged, never left unhandled, and the next pass runs", async () => {
    make();
    const dead = (await svc.create(TEAM, input({ timeout: 3600 }))).sandboxID as string;
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => void unhandled.push(err);
    process.on("unhandledRejection", onUnhandled);
    try {
      const alive = rt.alive.bind(rt);
      let fail = true;
      rt.alive = () => (fail ? Promise.reject(new Error("stat: no such file")) : alive());
      svc.startBackground({ reconcileEveryMs: 2000 });
      rt.die(dead);
      await clock.advance(2000);
      await until(() => log.lines.some((l) => l.msg === "a background pass failed"), "the failed pass to be logged");
      assert.equal(row(dead)?.state, "running", "nothing is decided on a failed look");
      fail = false;
      await clock.advance(2000);
      await until(() => row(dead) === undefined, "the next pass to remove the dead sandbox");
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(unhandled, []);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  test("a frozen sandbox whose processes die is kept paused on its disk; a sandbox being made is left alone", async () => {
    make();
    const frozen = (await svc.create(TEAM, input())).sandboxID as string;
    await svc.pause(TEAM, frozen);
    let release = () => undefined as void;
    rt.onCreate = () => new Promise<void>((r) => (release = r));
    const making = svc.create(TEAM, input());
    await until(() => rt.count("create") === 2, "the second create to reach the runtime");
    const starting = store.sandboxes.all().find((r) => r.state === "starting")!;
    svc.startBackground({ reconcileEveryMs: 2000 });
    rt.die(frozen);
    await clock.advance(2000);
    await until(() => row(frozen)?.onDisk === true, "the frozen sandbox to be paused to disk");
    assert.deepEqual([row(frozen)?.state, row(frozen)?.ip], ["paused", null]);
    assert.ok(rt.keptDisks.has(frozen));
    assert.equal(row(starting.id)?.state, "starting", "a create in flight is not the loop's");
    release();
    assert.equal((await making).sandboxID, starting.id, "and it completes");
  });

  test("a crash mid-snapshot: the half-made image is removed, nothing is listed, the sandbox runs on as it was", async () => {
    make();
    const id = (await svc.create(TEAM, input())).sandboxID as string;
    rt.onSnapshot = never;
    void svc.snapshot(TEAM, id, "half").catch(() => undefined);
    await until(() => row(id)?.transition === "snapshotting", "the store to show the snapshot under way");
    assert.equal(phaseOf(row(id)!), "snapshotting");
    assert.equal(svc.listV2(TEAM, { states: ["running"], metadata: [], order: "desc", limit: 10 }).items[0]?.state, "running", "the API shows it running meanwhile");
    const image = row(id)!.transitionImage!;
    assert.ok(rt.snaps.has(image), "the copy's image exists, half-made");
    // sandboxd dies here: a new one starts on the same store and runtime
    rt.onSnapshot = undefined;
    make(false);
    await svc.reconcile();
    assert.equal(rt.snaps.has(image), false, "the half-made image is removed");
    assert.deepEqual([row(id)?.state, row(id)?.transition, row(id)?.transitionImage], ["running", null, null]);
    assert.deepEqual(svc.listSnapshots(TEAM, { limit: 10 }).items, []);
    assert.ok(svc.index.lookup(id), "routed again");
    assert.ok(log.lines.some((l) => l.fields.sandboxID === id && l.fields.cut === "snapshotting" && l.fields.back === "running"));
    const again = await svc.snapshot(TEAM, id, "half");
    assert.equal(again.snapshotID, "default/half:default", "a snapshot can be taken again");
  });

  test("a crash mid-snapshot of a sandbox paused to disk returns it to paused on disk", async () => {
    make();
    const id = (await svc.create(TEAM, input())).sandboxID as string;
    await svc.pause(TEAM, id, false);
    rt.onSnapshot = never;
    void svc.snapshot(TEAM, id, undefined).catch(() => undefined);
    await until(() => row(id)?.transition === "snapshotting", "the snapshot to be under way");
    rt.onSnapshot = undefined;
    make(false);
    await svc.reconcile();
    assert.deepEqual([row(id)?.state, row(id)?.onDisk, row(id)?.transition], ["paused", true, null]);
    assert.equal(rt.snaps.size, 0);
    assert.equal((await svc.connect(TEAM, id, 30)).status, 201);
  });

  test("a crash mid-fork, during the copy or while the forks start: the fork's image and half-made forks go, the parent runs on", async () => {
    make();
    const parent = (await svc.create(TEAM, input())).sandboxID as string;
    rt.onSnapshot = never;
    void svc.fork(TEAM, parent, 2, 60).catch(() => undefined);
    await until(() => row(parent)?.transition === "snapshotting", "the fork's copy to be under way");
    rt.onSnapshot = undefined;
    make(false);
    await svc.reconcile();
    assert.deepEqual([row(parent)?.state, row(parent)?.transition, rt.snaps.size], ["running", null, 0]);

    rt.onCreate = never;
    void svc.fork(TEAM, parent, 2, 60).catch(() => undefined);
    await until(() => store.sandboxes.all().filter((r) => r.state === "starting").length === 2, "both forks to be starting");
    assert.equal(rt.snaps.size, 1, "the fork's image is held while the forks copy it");
    rt.onCreate = undefined;
    make(false);
    await svc.reconcile();
    assert.deepEqual(store.sandboxes.all().map((r) => r.id), [parent], "the half-made forks are gone");
    assert.deepEqual([row(parent)?.state, rt.snaps.size], ["running", 0]);
    assert.deepEqual([...rt.sandboxes.keys()], [parent], "nothing of the forks is left in the runtime");
  });

  test("a crash mid-resume from disk: the cold start is stopped and the sandbox is paused on its disk again", async () => {
    make();
    const id = (await svc.create(TEAM, input())).sandboxID as string;
    await svc.pause(TEAM, id, false);
    rt.onCreate = never;
    void svc.connect(TEAM, id, 60).catch(() => undefined);
    await until(() => row(id)?.transition === "resuming", "the cold start to be under way");
    assert.equal(phaseOf(row(id)!), "resuming");
    rt.onCreate = undefined;
    make(false);
    await svc.reconcile();
    assert.deepEqual([row(id)?.state, row(id)?.onDisk, row(id)?.transition, row(id)?.ip], ["paused", true, null, null]);
    assert.equal((await svc.connect(TEAM, id, 60)).status, 201);
    assert.equal(row(id)?.state, "running");
  });

  test("the state machine refuses moves it does not have", () => {
    const base = { state: "running", onDisk: false, transition: null, transitionImage: null } as unknown as SandboxRow;
    const as = (o: Partial<SandboxRow>) => ({ ...base, ...o }) as SandboxRow;
    assert.equal(canMove(undefined, as({ state: "starting" })), true);
    assert.equal(canMove(undefined, as({})), false, "a sandbox is recorded first as starting");
    assert.equal(canMove(as({}), as({ state: "starting" })), false);
    assert.equal(canMove(as({}), as({ transition: "snapshotting", transitionImage: "s1" })), true);
    assert.equal(canMove(as({}), as({ transition: "snapshotting" })), false, "a snapshot names its image");
    assert.equal(canMove(as({ transition: "snapshotting", transitionImage: "s1" }), as({})), true);
    assert.equal(canMove(as({ transition: "snapshotting", transitionImage: "s1" }), as({ state: "paused" })), false, "a snapshot returns the sandbox to its phase");
    assert.equal(canMove(as({ state: "paused", onDisk: true }), as({ state: "paused", onDisk: true, transition: "resuming" })), true);
    assert.equal(canMove(as({ state: "paused" }), as({ state: "paused", transition: "resuming" })), false, "only a sandbox paused to disk is cold-started");
    assert.equal(canMove(as({ state: "paused", onDisk: true, transition: "resuming" }), as({})), true);
    assert.equal(canMove(as({ state: "paused", onDisk: true }), as({})), false, "a sandbox on disk runs again only through resuming");
  });
});

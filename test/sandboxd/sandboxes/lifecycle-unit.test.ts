import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { createJsonLogger } from "../../../src/common/log.js";
import { statusOf } from "../../../src/sandboxd/api/errors.js";
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

describe("the sandbox lifecycle on a fake runtime and a manual clock", () => {
  let store: Store;
  let templateID: string;
  let rt: FakeRuntime;
  let envd: FakeEnvd;
  let clock: ManualClock;
  let svc: SandboxService;

  const make = (warmPoolSize = 0) => {
    rt = new FakeRuntime();
    envd = fakeEnvd();
    clock = new ManualClock();
    svc = createSandboxService({
      store, runtime: rt, log, clock, envd: envd.connect, warmPoolSize, defaultTemplateID: templateID,
      budget: { host: {}, team: {}, maxSandboxMemoryMB: 8192 },
    });
    return svc;
  };
  const state = (id: string) => store.sandboxes.get(id)?.state;

  useUnitStore("lifecycle-unit-", {
    ready: (s, t) => {
      store = s;
      templateID = t;
    },
    reset: async () => {
      await svc?.close();
    },
  });

  test("a create starts the sandbox, inits envd with its variables and token, and publishes it; a kill removes all of it", async () => {
    make();
    const body = await svc.create(TEAM, input({ envVars: { A: "1" } }));
    const id = body.sandboxID as string;
    assert.equal(state(id), "running");
    const sb = rt.sandboxes.get(id)!;
    assert.equal(sb.spec.background, false);
    const route = svc.index.lookup(id)!;
    assert.deepEqual([route.state, route.ip], ["running", sb.addr.ip]);
    assert.ok(svc.egressOf(sb.addr.ip), "its outbound rules are published by address");
    assert.equal(envd.inits.length, 1);
    assert.equal(envd.inits[0].addr.accessToken, body.envdAccessToken, "envd gets the token the create answers");
    assert.deepEqual(envd.inits[0].settings.envVars, { A: "1", E2B_SANDBOX_ID: id, E2B_TEMPLATE_ID: templateID, E2B_SANDBOX: "true" });
    await svc.kill(TEAM, id);
    assert.equal(state(id), undefined);
    assert.equal(svc.index.lookup(id), undefined);
    assert.equal(svc.egressOf(sb.addr.ip), undefined);
    assert.equal(rt.sandboxes.has(id), false);
    await assert.rejects(svc.kill(TEAM, id), (e: Error) => statusOf(e) === 404);
  });

  test("a create whose runtime fails leaves nothing behind and answers 500", async () => {
    make();
    rt.onCreate = () => {
      throw new Error("no room for the sandbox");
    };
    await assert.rejects(svc.create(TEAM, input()), (e: Error) => statusOf(e) === 500 && /starting the sandbox failed: no room/.test(e.message));
    assert.equal(store.sandboxes.all().length, 0);
    assert.equal(rt.count("remove"), 1, "what the create began is removed");
    envd.failInit = "envd refused /init";
    rt.onCreate = undefined;
    await assert.rejects(svc.create(TEAM, input()), (e: Error) => statusOf(e) === 500 && /initializing envd failed/.test(e.message));
    assert.equal(store.sandboxes.all().length, 0);
    assert.equal(rt.sandboxes.size, 0);
  });

  test("pause freezes and unpublishes the egress; resume thaws, re-inits envd and runs again; connect resumes a paused one", async () => {
    make();
    const id = (await svc.create(TEAM, input())).sandboxID as string;
    const ip = rt.sandboxes.get(id)!.addr.ip;
    await svc.pause(TEAM, id);
    assert.equal(state(id), "paused");
    assert.equal(rt.sandboxes.get(id)!.status, "paused");
    assert.equal(svc.index.lookup(id)?.state, "paused");
    assert.equal(svc.egressOf(ip), undefined);
    await assert.rejects(svc.pause(TEAM, id), (e: Error) => statusOf(e) === 409);
    await svc.resume(TEAM, id, 60);
    assert.equal(state(id), "running");
    assert.equal(rt.sandboxes.get(id)!.status, "running");
    assert.equal(envd.inits.length, 2);
    assert.equal(envd.inits[1].settings.envVars, undefined, "a resume leaves envd's variables as the create set them");
    await assert.rejects(svc.resume(TEAM, id, 60), (e: Error) => statusOf(e) === 409);
    await svc.pause(TEAM, id);
    assert.equal((await svc.connect(TEAM, id, 60)).status, 201);
    assert.equal((await svc.connect(TEAM, id, 60)).status, 200);
  });

  test("the evictor kills a sandbox when its timeout passes on the clock, and pauses one with autoPause", async () => {
    make();
    const killed = (await svc.create(TEAM, input({ timeout: 10 }))).sandboxID as string;
    const paused = (await svc.create(TEAM, input({ timeout: 20, autoPause: true }))).sandboxID as string;
    svc.startBackground({ evictEveryMs: 250 });
    await clock.advance(9_000);
    assert.deepEqual([state(killed), state(paused)], ["running", "running"]);
    await svc.setTimeout(TEAM, paused, 15);
    await clock.advance(2_000);
    await rt.when("remove", killed);
    await until(() => state(killed) === undefined, "the expired sandbox's row to go");
    assert.equal(state(paused), "running", "a timeout extended meanwhile wins");
    await clock.advance(14_000);
    await rt.when("freeze", paused);
    await until(() => state(paused) === "paused", "the autoPause sandbox to be paused");
    assert.equal(rt.sandboxes.has(paused), true);
  });

  test("a create claims a pooled sandbox of its template: no new container, its CPU share given, envd re-initialized with the token", async () => {
    make(1);
    svc.startBackground({ evictEveryMs: 250 });
    await until(() => svc.pool.stats().ready.length === 1, "the pool to fill");
    const pooled = [...rt.sandboxes.keys()][0];
    assert.equal(rt.sandboxes.get(pooled)!.spec.background, true);
    assert.deepEqual(envd.commands.map((c) => c.cmd), ["true"], "the pooled sandbox ran its warm-up command");
    const body = await svc.create(TEAM, input({ allowInternetAccess: false }));
    assert.equal(body.sandboxID, pooled);
    assert.equal(rt.sandboxes.get(pooled)!.foreground, true);
    assert.equal(rt.count("setEgress"), 1, "the create's own rules replaced the pool's");
    assert.equal(envd.inits.at(-1)!.addr.accessToken, body.envdAccessToken);
    assert.equal(svc.pool.stats().claimed, 1);
    await until(() => svc.pool.stats().ready.length === 1, "the pool to refill");
    assert.equal(rt.count("create"), 2);
  });

  test("a pooled start that hangs is abandoned at close, and what it began is removed", async () => {
    make(1);
    rt.onCreate = () => new Promise<void>(() => undefined);
    svc.startBackground({ evictEveryMs: 250 });
    await rt.when("create");
    const id = rt.calls[0].sandboxID;
    await svc.close();
    await rt.when("remove", id);
    assert.equal(svc.pool.stats().ready.length, 0);
  });

  test("reconcile drops rows whose sandbox is gone, freezes paused ones that run, and removes sandboxes the store does not know", async () => {
    make();
    const keep = (await svc.create(TEAM, input())).sandboxID as string;
    const gone = (await svc.create(TEAM, input())).sandboxID as string;
    const frozen = (await svc.create(TEAM, input())).sandboxID as string;
    await svc.pause(TEAM, frozen);
    await svc.close();
    const stranger = await rt.create({ ...rt.sandboxes.get(keep)!.spec, sandboxID: "istranger" });
    rt.die(gone);
    rt.sandboxes.get(frozen)!.status = "running";
    const again = createSandboxService({ store, runtime: rt, log, clock, envd: envd.connect, budget: { host: {}, team: {}, maxSandboxMemoryMB: 8192 } });
    svc = again;
    await again.reconcile();
    assert.deepEqual([state(keep), state(gone), state(frozen)], ["running", undefined, "paused"]);
    assert.equal(rt.sandboxes.get(frozen)!.status, "paused");
    assert.equal(rt.sandboxes.has(stranger.sandboxID), false);
    assert.equal(again.index.lookup(keep)?.ip, rt.sandboxes.get(keep)!.addr.ip);
    assert.equal(again.index.lookup(gone), undefined);
  });
});

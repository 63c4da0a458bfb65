import { afterEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createJsonLogger } from "../../src/common/log.js";
import { WarmPool, type WarmPoolOptions, type WarmSandbox } from "../../src/sandboxd/pool/warm-pool.js";
import type { Template } from "../../src/sandboxd/store/templates.js";

const log = createJsonLogger({ level: "silent", fd: 2, name: "test" });
/** Pools a test made; closed after each test whatever it asserted. */
const open: WarmPool[] = [];

function template(id: string, buildID = "b1"): Template {
  return {
    id, buildID, alias: null, teamID: "t", cpuCount: 1, memoryMB: 256, diskSizeMB: 1024, envdVersion: "0.6.13", defaultUser: "user", defaultWorkdir: "/home/user",
    rootfs: "/nonexistent", createdAt: "", updatedAt: "", spawnCount: 0, lastSpawnedAt: null,
  };
}

/** A pool whose sandboxes are records: `make` takes `makeMs` and fails while `failing` is set. */
function harness(o: { size: number; templates: () => Template[]; makeMs?: number; busy?: () => boolean; admit?: WarmPoolOptions["admit"] }) {
  let n = 0;
  const made: string[] = [];
  const removed: string[] = [];
  const state = { failing: false, inFlight: 0, maxInFlight: 0 };
  const pool = new WarmPool({
    size: o.size, log, templates: o.templates, newID: () => `s${++n}`, foregroundBusy: o.busy ?? (() => false), admit: o.admit,
    async make(tpl, id, signal): Promise<WarmSandbox> {
      state.inFlight++;
      state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
      try {
        await new Promise((r) => setTimeout(r, o.makeMs ?? 20));
        signal.throwIfAborted();
        if (state.failing) throw new Error("cannot start");
        made.push(id);
        return { sandboxID: id, templateID: tpl.id, buildID: tpl.buildID, cpuCount: tpl.cpuCount, memoryMB: tpl.memoryMB, diskMB: tpl.diskSizeMB, addr: { sandboxID: id, ip: "10.0.0.2", envdPort: 49983 }, policyKey: "{}" };
      } finally {
        state.inFlight--;
      }
    },
    async remove(id) {
      removed.push(id);
    },
  });
  open.push(pool);
  return { pool, made, removed, state };
}

async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
}

const ready = (pool: WarmPool, id: string) => pool.stats().ready.find((r) => r.templateID === id)?.count ?? 0;

describe("the warm pool", () => {
  afterEach(async () => {
    await Promise.all(open.splice(0).map((p) => p.close()));
  });

  test("fills each wanted template to its size, at most two starts at once, and refills after a claim", async () => {
    const a = template("a");
    const b = template("b");
    const h = harness({ size: 3, templates: () => [a, b] });
    h.pool.start();
    await until(() => ready(h.pool, "a") === 3 && ready(h.pool, "b") === 3);
    assert.ok(h.state.maxInFlight <= 2, `${h.state.maxInFlight} starts ran at once`);
    const got = await h.pool.take(a);
    assert.ok(got && got.templateID === "a");
    assert.equal(ready(h.pool, "a"), 2);
    await until(() => ready(h.pool, "a") === 3);
    assert.deepEqual(h.pool.stats().claimed, 1);
    await h.pool.close();
    assert.equal(h.removed.length, 6, "close removes every pooled sandbox");
    assert.equal(h.pool.stats().ready.length, 0);
  });

  test("a take of another build misses; a take while one is starting waits for it", async () => {
    const a = template("a");
    const h = harness({ size: 1, templates: () => [a], makeMs: 150 });
    assert.equal(await h.pool.take(template("a", "other")), undefined);
    h.pool.start();
    await until(() => h.state.inFlight === 1);
    const t0 = Date.now();
    const got = await h.pool.take(a);
    assert.ok(got, "the take waited for the start in flight");
    assert.ok(Date.now() - t0 < 1000);
    const stats = h.pool.stats();
    assert.equal(stats.claimed, 1);
    assert.equal(stats.missed, 1);
    await h.pool.close();
  });

  test("sandboxes of a build no longer wanted are removed, and the new build is filled", async () => {
    let current = template("a", "b1");
    const h = harness({ size: 2, templates: () => [current] });
    h.pool.start();
    await until(() => ready(h.pool, "a") === 2);
    const old = [...h.made];
    current = template("a", "b2");
    h.pool.kick();
    await until(() => h.removed.length === 2 && ready(h.pool, "a") === 2);
    assert.deepEqual(h.removed.sort(), old.sort());
    assert.equal((await h.pool.take(template("a", "b1"))), undefined);
    assert.equal((await h.pool.take(current))?.buildID, "b2");
    await h.pool.close();
  });

  test("a template that fails to start is retried with growing waits, not in a loop; failed starts are removed", async () => {
    const a = template("a");
    const h = harness({ size: 2, templates: () => [a], makeMs: 1 });
    h.state.failing = true;
    h.pool.start();
    await new Promise((r) => setTimeout(r, 2500));
    // two starts at once, then waits of 1 s and more: at most three rounds in 2.5 s, where a loop would make hundreds
    assert.ok(h.removed.length >= 2 && h.removed.length <= 6, `${h.removed.length} failed starts`);
    h.state.failing = false;
    await h.pool.close();
  });

  test("a refill starts only when the budget admits it, counting what the pool holds and starts in flight; shed gives pooled sandboxes back", async () => {
    const a = template("a");
    const refused: number[] = [];
    const h = harness({
      size: 4, templates: () => [a], makeMs: 50,
      admit: (need, pooled) => {
        const ok = pooled.memoryMB + need.memoryMB <= 512;
        if (!ok) refused.push(pooled.memoryMB);
        return ok;
      },
    });
    h.pool.start();
    await until(() => ready(h.pool, "a") === 2 && refused.length > 0);
    assert.deepEqual(refused.filter((m) => m !== 512), [], "every refusal saw both sandboxes (ready or starting) counted");
    assert.equal(h.made.length, 2);
    assert.deepEqual(h.pool.reserved(), { memoryMB: 512, diskMB: 2048 });
    assert.equal(await h.pool.shed(() => h.pool.reserved().memoryMB <= 256), true);
    assert.equal(h.removed.length, 1);
    assert.equal(ready(h.pool, "a"), 1);
    assert.equal(await h.pool.shed(() => true), false, "nothing is shed when the create already fits");
    await h.pool.close();
  });

  test("no start begins while creates are in flight; a giveBack returns the sandbox to the front", async () => {
    const a = template("a");
    let busy = true;
    const h = harness({ size: 1, templates: () => [a], busy: () => busy });
    h.pool.start();
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(h.made.length, 0);
    busy = false;
    h.pool.kick();
    await until(() => ready(h.pool, "a") === 1);
    busy = true;
    const got = await h.pool.take(a);
    assert.ok(got);
    h.pool.giveBack(got);
    assert.equal(ready(h.pool, "a"), 1);
    assert.equal((await h.pool.take(a))?.sandboxID, got.sandboxID);
    await h.pool.close();
  });
});

import { afterEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createJsonLogger } from "../../../src/common/log.js";
import { WarmPool, type WarmPoolOptions, type WarmSandbox } from "../../../src/sandboxd/pool/warm-pool.js";
import type { Template } from "../../../src/sandboxd/store/templates.js";
import { ManualClock, settle, until } from "../helpers/manual-clock.js";

const log = createJsonLogger({ level: "silent", fd: 2, name: "test" });
/** Pools a test made; closed after each test whatever it asserted. */
const open: WarmPool[] = [];

function template(id: string, buildID = "b1"): Template {
  return {
    id, buildID, alias: null, teamID: "t", cpuCount: 1, memoryMB: 256, diskSizeMB: 1024, envdVersion: "0.6.13", defaultUser: "user", defaultWorkdir: "/home/user",
    rootfs: "/nonexistent", createdAt: "", updatedAt: "", spawnCount: 0, lastSpawnedAt: null,
  };
}

/**
 * A pool on a manual clock whose sandboxes are records: `make` finishes at once, or, with
 * `gated`, when the test opens the gate; it fails while `failing` is set.
 */
function harness(o: { size: number; templates: () => Template[]; gated?: boolean; busy?: () => boolean; admit?: WarmPoolOptions["admit"] }) {
  let n = 0;
  const clock = new ManualClock();
  const made: string[] = [];
  const removed: string[] = [];
  /** When each start was asked for (clock time). */
  const starts: number[] = [];
  const gates: (() => void)[] = [];
  const state = { failing: false, inFlight: 0, maxInFlight: 0 };
  const pool = new WarmPool({
    size: o.size, log, clock, templates: o.templates, newID: () => `s${++n}`, foregroundBusy: o.busy ?? (() => false), admit: o.admit,
    async make(tpl, id, signal): Promise<WarmSandbox> {
      starts.push(clock.now());
      state.inFlight++;
      state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
      try {
        if (o.gated) {
          await new Promise<void>((resolve, reject) => {
            gates.push(resolve);
            signal.addEventListener("abort", () => reject(signal.reason as Error), { once: true });
          });
        }
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
  const openGates = () => gates.splice(0).forEach((g) => g());
  return { pool, clock, made, removed, starts, state, openGates };
}

const ready = (pool: WarmPool, id: string) => pool.stats().ready.find((r) => r.templateID === id)?.count ?? 0;

describe("the warm pool", () => {
  afterEach(async () => {
    await Promise.all(open.splice(0).map((p) => p.close()));
  });

  test("fills each wanted template to its size, at most two starts at once, and refills after a claim", async () => {
    const a = template("a");
    const b = template("b");
    const h = harness({ size: 3, templates: () => [a, b], gated: true });
    h.pool.start();
    while (h.made.length < 6) {
      await until(() => h.state.inFlight > 0, "the next start");
      h.openGates();
      await settle();
    }
    await until(() => ready(h.pool, "a") === 3 && ready(h.pool, "b") === 3, "both templates filled");
    assert.equal(h.state.maxInFlight, 2, "two starts ran at once, never more");
    const got = await h.pool.take(a);
    assert.ok(got && got.templateID === "a");
    assert.equal(ready(h.pool, "a"), 2);
    await until(() => h.state.inFlight === 1, "the refill");
    h.openGates();
    await until(() => ready(h.pool, "a") === 3, "the refill to finish");
    assert.deepEqual(h.pool.stats().claimed, 1);
    await h.pool.close();
    assert.equal(h.removed.length, 6, "close removes every pooled sandbox");
    assert.equal(h.pool.stats().ready.length, 0);
  });

  test("a take of another build misses; a take while one is starting waits for it", async () => {
    const a = template("a");
    const h = harness({ size: 1, templates: () => [a], gated: true });
    assert.equal(await h.pool.take(template("a", "other")), undefined);
    h.pool.start();
    await until(() => h.state.inFlight === 1, "the start");
    let got: WarmSandbox | undefined | "waiting" = "waiting";
    const taking = h.pool.take(a).then((w) => (got = w));
    await settle();
    assert.equal(got, "waiting", "the take waits for the start in flight");
    h.openGates();
    await taking;
    assert.ok(got && got !== "waiting", "the take got what the start made");
    const stats = h.pool.stats();
    assert.equal(stats.claimed, 1);
    assert.equal(stats.missed, 1);
    await h.pool.close();
  });

  test("sandboxes of a build no longer wanted are removed, and the new build is filled", async () => {
    let current = template("a", "b1");
    const h = harness({ size: 2, templates: () => [current] });
    h.pool.start();
    await until(() => ready(h.pool, "a") === 2, "the first build filled");
    const old = [...h.made];
    current = template("a", "b2");
    h.pool.kick();
    await until(() => h.removed.length === 2 && ready(h.pool, "a") === 2, "the new build filled");
    assert.deepEqual(h.removed.sort(), old.sort());
    assert.equal(await h.pool.take(template("a", "b1")), undefined);
    assert.equal((await h.pool.take(current))?.buildID, "b2");
    await h.pool.close();
  });

  test("a template that fails to start is retried with growing waits, not in a loop; failed starts are removed", async () => {
    const a = template("a");
    const h = harness({ size: 2, templates: () => [a] });
    h.state.failing = true;
    h.pool.start();
    await until(() => h.removed.length === 2, "the first two starts to fail");
    await settle(20);
    assert.equal(h.starts.length, 2, "with the clock stopped, nothing is retried");
    for (let s = 0; s < 60; s++) await h.clock.advance(1000);
    // Starts go in twos, each pair after a wait twice as long as the one before (1 s, 2 s, ... up to a minute, on 2 s ticks).
    const at = [...new Set(h.starts)];
    const gaps = at.slice(1).map((t, i) => t - at[i]);
    assert.ok(gaps.length >= 3, `retries at ${JSON.stringify(gaps)}`);
    for (let i = 1; i < gaps.length; i++) assert.ok(gaps[i] > gaps[i - 1], `the waits grow: ${JSON.stringify(gaps)}`);
    assert.ok(h.starts.length <= 10, `${h.starts.length} starts in a minute`);
    assert.equal(h.removed.length, h.starts.length, "every failed start was removed");
    h.state.failing = false;
    await h.pool.close();
  });

  test("a refill starts only when the budget admits it, counting what the pool holds and starts in flight; shed gives pooled sandboxes back", async () => {
    const a = template("a");
    const refused: number[] = [];
    const h = harness({
      size: 4, templates: () => [a], gated: true,
      admit: (need, pooled) => {
        const ok = pooled.memoryMB + need.memoryMB <= 512;
        if (!ok) refused.push(pooled.memoryMB);
        return ok;
      },
    });
    h.pool.start();
    await until(() => h.state.inFlight === 2, "two starts");
    h.openGates();
    await until(() => ready(h.pool, "a") === 2 && refused.length > 0, "the two starts to finish, then a refusal");
    await h.clock.advance(2000);
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
    for (let i = 0; i < 20; i++) await h.clock.advance(25);
    assert.equal(h.made.length, 0);
    busy = false;
    h.pool.kick();
    await until(() => ready(h.pool, "a") === 1, "the start once creates are done");
    busy = true;
    const got = await h.pool.take(a);
    assert.ok(got);
    h.pool.giveBack(got);
    assert.equal(ready(h.pool, "a"), 1);
    assert.equal((await h.pool.take(a))?.sandboxID, got.sandboxID);
    await h.pool.close();
  });

  test("a pooled sandbox that stops running is dropped at the next check", async () => {
    const a = template("a");
    const alive = new Set<string>();
    const clock = new ManualClock();
    let n = 0;
    const pool = new WarmPool({
      size: 1, log, clock, templates: () => [a], newID: () => `p${n++}`, foregroundBusy: () => false,
      make: async (tpl, id) => {
        alive.add(id);
        return { sandboxID: id, templateID: tpl.id, buildID: tpl.buildID, cpuCount: 1, memoryMB: 256, diskMB: 1024, addr: { sandboxID: id, ip: "10.0.0.3", envdPort: 49983 }, policyKey: "{}" };
      },
      remove: async (id) => void alive.delete(id),
      running: async (ids) => new Set(ids.filter((id) => alive.has(id))),
    });
    open.push(pool);
    pool.start();
    await until(() => ready(pool, "a") === 1, "the pool filled");
    alive.clear();
    await clock.advance(4000);
    assert.equal(ready(pool, "a"), 1, "not checked yet");
    await clock.advance(2000);
    await until(() => ready(pool, "a") === 1 && alive.has("p1"), "the dead sandbox replaced");
    await pool.close();
  });
});

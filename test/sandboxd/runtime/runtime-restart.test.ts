// The runc runtime across sandboxd restarts and failures: a new instance on the same data dir
// finds running sandboxes, removes what a crash left half-made, and a failed or aborted create
// leaves nothing behind.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createRuncRuntime } from "../../../src/sandboxd/runtime/runc.js";
import { cgroupDirsLike, health, leftovers, sh, skipReason, testRuntime, type TestRuntime } from "../helpers/runtime.js";

const skip = skipReason();

describe("runc runtime: restart, sweep and failed creates", { skip }, () => {
  let t: TestRuntime;

  before(async () => {
    t = await testRuntime(205);
  });
  after(async () => {
    await t?.cleanup();
  });

  test("a runtime made anew on the same data dir lists the running sandbox and can remove it", async () => {
    const spec = t.spec();
    const sb = await t.rt.create(spec);
    await sh(sb.ip, "echo kept > /root/f");
    const again = createRuncRuntime(t.opts);
    assert.deepEqual(await again.list(), [{ sandboxID: spec.sandboxID, ip: sb.ip, envdPort: 49983, status: "running" }]);
    assert.equal((await sh(sb.ip, "cat /root/f")).stdout, "kept\n");
    await again.freeze(spec.sandboxID);
    assert.equal((await t.rt.list())[0].status, "paused");
    await again.remove(spec.sandboxID);
    assert.deepEqual(await t.rt.list(), []);
    assert.deepEqual(leftovers(t.dataDir), []);
  });

  test("sweep removes what is not kept (a dead container's leftovers too) and keeps the rest", async () => {
    const keep = t.spec();
    const dead = t.spec();
    const other = t.spec();
    const [a, , c] = await Promise.all([t.rt.create(keep), t.rt.create(dead), t.rt.create(other)]);
    // the container dies under a stopped sandboxd: its mount, veth, slot and files stay
    execFileSync("runc", ["--root", join(t.dataDir, "runc"), "kill", dead.sandboxID, "KILL"]);
    for (let i = 0; i < 50 && (await t.rt.list()).find((s) => s.sandboxID === dead.sandboxID)?.status !== "stopped"; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const restarted = createRuncRuntime(t.opts);
    const seen = new Map((await restarted.list()).map((s) => [s.sandboxID, s.status]));
    assert.equal(seen.get(dead.sandboxID), "stopped");
    assert.equal(seen.get(keep.sandboxID), "running");
    await restarted.sweep(new Set([keep.sandboxID]));
    assert.deepEqual((await restarted.list()).map((s) => s.sandboxID), [keep.sandboxID]);
    assert.equal(await health(a.ip), 204);
    assert.notEqual(await health(c.ip, 500), 204);
    for (const id of [dead.sandboxID, other.sandboxID]) assert.deepEqual(cgroupDirsLike(id), []);
    await restarted.remove(keep.sandboxID);
    assert.deepEqual(leftovers(t.dataDir), []);
  });

  test("a sandboxd killed -9 during create leaves nothing once a new instance sweeps", async () => {
    const child = join(import.meta.dirname, "..", "helpers", "runtime-child.js");
    for (const ms of [150, 400, 700, 1000]) {
      const spec = t.spec();
      const proc = spawn(process.execPath, [child, t.dataDir, t.opts.envdDir, t.networkCidr, spec.rootfs, spec.sandboxID], { stdio: "ignore" });
      const exited = new Promise((r) => proc.once("exit", r));
      await new Promise((r) => setTimeout(r, ms));
      // on a fast machine the create may already be done (the sweep must then remove a live sandbox)
      proc.kill("SIGKILL");
      await exited;
      // tools it had started (runc, ip, nsenter) finish on their own, as they would after a crash
      for (let i = 0; i < 100 && spawnSync("pgrep", ["-f", t.dataDir]).status === 0; i++) await new Promise((r) => setTimeout(r, 100));
      const restarted = createRuncRuntime(t.opts);
      await restarted.sweep(new Set());
      assert.deepEqual(await restarted.list(), [], `after a kill at ${ms} ms`);
      assert.deepEqual(leftovers(t.dataDir), [], `after a kill at ${ms} ms`);
      assert.deepEqual(cgroupDirsLike(spec.sandboxID), [], `after a kill at ${ms} ms`);
    }
  });

  test("a create whose envd cannot start cleans up and shows envd's output", async () => {
    const dir = mkdtempSync("/tmp/sandboxd-badenvd-");
    try {
      chmodSync(dir, 0o755);
      writeFileSync(join(dir, "envd"), "#!/bin/sh\necho 'envd: cannot bind, giving up' >&2\nexit 1\n", { mode: 0o755 });
      const broken = createRuncRuntime({ ...t.opts, envdDir: dir, startTimeoutMs: 3000 });
      const spec = t.spec();
      await assert.rejects(broken.create(spec), (err: Error) => {
        assert.match(err.message, /envd did not listen on port 49983 within 3000 ms/);
        assert.match(err.message, /envd: cannot bind, giving up/);
        return true;
      });
      assert.deepEqual(await t.rt.list(), []);
      assert.deepEqual(leftovers(t.dataDir), []);
      assert.deepEqual(cgroupDirsLike(spec.sandboxID), []);
      assert.throws(() => createRuncRuntime({ ...t.opts, envdDir: "/nonexistent-envd" }), /envd directory .* does not exist/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an aborted create cleans up", async () => {
    const spec = t.spec();
    const ac = new AbortController();
    const p = t.rt.create(spec, ac.signal);
    // once the create is under way (its disk, layer and slot are being made): a fixed delay
    // would race a create that finishes in ~100 ms
    setImmediate(() => ac.abort());
    await assert.rejects(p);
    assert.deepEqual(await t.rt.list(), []);
    assert.deepEqual(leftovers(t.dataDir), []);
    assert.deepEqual(cgroupDirsLike(spec.sandboxID), []);
  });

  test("a data dir that sandbox root cannot reach is refused up front, naming the directory", () => {
    const dir = mkdtempSync("/tmp/sandboxd-private-");
    try {
      chmodSync(dir, 0o700);
      assert.throws(() => createRuncRuntime({ ...t.opts, dataDir: join(dir, "data") }), new RegExp(`${dir} has mode 700`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("bad specs are refused with the field named; removing an unknown ID succeeds", async () => {
    await assert.rejects(t.rt.create(t.spec({ sandboxID: "../etc" })), /sandbox ID/);
    await assert.rejects(t.rt.create(t.spec({ memoryMB: 8 })), /memoryMB/);
    await assert.rejects(t.rt.create(t.spec({ cpuCount: 0 })), /cpuCount/);
    await assert.rejects(t.rt.create(t.spec({ rootfs: "/nonexistent" })), /rootfs/);
    await t.rt.remove("inothere");
    await t.rt.remove("../../etc");
  });
});

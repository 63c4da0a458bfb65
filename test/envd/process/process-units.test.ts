import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { ProcessSelectorSchema } from "../../../src/envd/gen/process/process_pb.js";
import { Broadcast } from "../../../src/envd/process/broadcast.js";
import { endFields, signalName } from "../../../src/envd/process/exit-status.js";
import { execLine, type ExecTools } from "../../../src/envd/process/wrapper.js";
import { buildEnv, parseLifetime } from "../../../src/envd/process/plan.js";
import { ProcessRegistry } from "../../../src/envd/process/registry.js";
import { ProcessHandle } from "../../../src/envd/process/handle.js";
import type { User } from "../../../src/envd/auth/users.js";

const limits = { maxBytes: 100, highWater: 40, lowWater: 10 };
const tooFar = (): Error => new ConnectError("behind", Code.ResourceExhausted);
const user: User = { name: "user", uid: 1001, gid: 1001, home: "/home/user", shell: "/bin/bash", groups: [1001, 27] };

test("broadcast delivers every item in order to every subscriber, then the final item", async () => {
  const b = new Broadcast<string>(limits, (s) => s.length, tooFar);
  const a = b.subscribe();
  const c = b.subscribe();
  b.publish("one");
  b.publish("two");
  b.close("end");
  for (const sub of [a, c]) {
    const got: string[] = [];
    for await (const item of sub) got.push(item);
    assert.deepEqual(got, ["one", "two", "end"]);
  }
  const late: string[] = [];
  for await (const item of b.subscribe()) late.push(item);
  assert.deepEqual(late, ["end"], "a subscriber after close gets only the final item");
});

test("broadcast ends only the subscriber that fell too far behind; the live one keeps everything", async () => {
  const b = new Broadcast<string>(limits, (s) => s.length, tooFar);
  const stalled = b.subscribe();
  const live = b.subscribe();
  const got: string[] = [];
  const reader = (async () => {
    for await (const item of live) got.push(item);
  })();
  for (let i = 0; i < 20; i++) {
    b.publish("x".repeat(10));
    await new Promise((r) => setImmediate(r));
  }
  b.close("end");
  await reader;
  assert.equal(got.length, 21);
  await assert.rejects(stalled.next(), (e: ConnectError) => e.code === Code.ResourceExhausted);
  assert.equal(b.size, 0);
});

test("broadcast is saturated only when every subscriber is full, and reports the drain", async () => {
  let drains = 0;
  const b = new Broadcast<string>(limits, (s) => s.length, tooFar, () => drains++);
  assert.equal(b.saturated, false, "no subscriber: never saturated (output is dropped)");
  const slow = b.subscribe();
  const fast = b.subscribe();
  b.publish("x".repeat(45));
  assert.equal(b.saturated, true);
  await fast.next();
  assert.equal(b.saturated, false, "one subscriber caught up");
  assert.ok(drains >= 1);
  await slow.return();
  assert.equal(b.size, 1);
});

test("subscription return() releases a pending next()", async () => {
  const b = new Broadcast<string>(limits, (s) => s.length, tooFar);
  const sub = b.subscribe();
  const pending = sub.next();
  await sub.return();
  assert.deepEqual(await pending, { value: undefined, done: true });
  assert.equal(b.size, 0);
});

test("end fields read like the reference's", () => {
  assert.deepEqual(endFields({ code: 0, signal: null }), { exitCode: 0, exited: true, status: "exit status 0" });
  assert.deepEqual(endFields({ code: 2, signal: null }), { exitCode: 2, exited: true, status: "exit status 2", error: "exit status 2" });
  assert.deepEqual(endFields({ code: null, signal: "SIGKILL" }), { exitCode: -1, exited: false, status: "signal: killed", error: "signal: killed" });
  assert.equal(endFields({ code: null, signal: "SIGTERM" }).status, "signal: terminated");
  assert.equal(endFields({ code: null, signal: "SIGSEGV" }).status, "signal: segmentation fault");
  assert.equal(signalName(9), "SIGKILL");
});

test("exec line drops to the user with uid, gid and supplementary groups through setpriv", () => {
  const tools: ExecTools = { sh: "/bin/sh", setpriv: "/usr/bin/setpriv", nicePrefix: ["/usr/bin/nice", "-n", "20"], ionicePrefix: [], euid: 0, niceness: -20, ioDefault: true };
  const line = execLine("ls", ["-l", "/"], user, tools);
  assert.equal(line.file, "/bin/sh");
  assert.equal(line.args[0], "-c");
  assert.match(line.args[1], /oom_score_adj.*exec "\$@"/);
  assert.deepEqual(line.args.slice(2), [
    "envd-exec", "/usr/bin/nice", "-n", "20",
    "/usr/bin/setpriv", "--reuid", "1001", "--regid", "1001", "--groups", "1001,27", "--",
    "ls", "-l", "/",
  ]);
  assert.equal(line.uid, undefined);
  const fallback = execLine("ls", [], user, { ...tools, setpriv: undefined });
  assert.equal(fallback.uid, 1001);
  assert.equal(fallback.gid, 1001);
  assert.match(execLine("ls", [], user, tools, true).args[1], /^unset TERM; /);
});

test("Connect-Timeout-Ms parsing and environment order", () => {
  assert.equal(parseLifetime(null), undefined);
  assert.equal(parseLifetime("0"), undefined);
  assert.equal(parseLifetime("1500"), 1500);
  assert.throws(() => parseLifetime("1.5"), (e: ConnectError) => e.code === Code.InvalidArgument);
  assert.throws(() => parseLifetime("soon"), (e: ConnectError) => e.code === Code.InvalidArgument);
  const env = buildEnv(user, "/bin", { HOME: "/init-home", A: "init" }, { A: "req" });
  assert.deepEqual(env, { PATH: "/bin", HOME: "/init-home", USER: "user", LOGNAME: "user", A: "req" });
});

test("registry: lookup by pid and tag, retention, and tag reuse discarding the predecessor's exit", async () => {
  const reg = new ProcessRegistry(2, 50);
  const byPid = (pid: number) => create(ProcessSelectorSchema, { selector: { case: "pid", value: pid } });
  const byTag = (tag: string) => create(ProcessSelectorSchema, { selector: { case: "tag", value: tag } });
  const make = (pid: number, tag?: string): ProcessHandle => {
    const h = new ProcessHandle({ $typeName: "process.ProcessConfig", cmd: "x", args: [], envs: {} }, tag, false);
    h.attach({ pid, pause() {}, resume() {}, release() {} }, 0);
    reg.add(h);
    return h;
  };
  const a = make(10, "a");
  make(11);
  make(12, "b");
  assert.throws(() => reg.checkCapacity(), (e: ConnectError) => e.code === Code.ResourceExhausted);
  assert.equal((reg.find(byTag("b")) as { live: ProcessHandle }).live.pid, 12, "tag search looks at every process");
  assert.throws(() => reg.find(byPid(99)), (e: ConnectError) => e.code === Code.NotFound && /pid 99/.test(e.rawMessage));
  assert.throws(() => reg.find(undefined), (e: ConnectError) => e.code === Code.InvalidArgument);
  a.exited({ code: 3, signal: null });
  const retained = reg.find(byTag("a"));
  assert.ok("exit" in retained && retained.exit.end.exitCode === 3);
  assert.throws(() => reg.findLive(byPid(10)), (e: ConnectError) => e.code === Code.NotFound);
  make(20, "a");
  assert.ok("live" in reg.find(byTag("a")), "the successor with the same tag wins");
  assert.throws(() => reg.find(byPid(10)), (e: ConnectError) => e.code === Code.NotFound, "predecessor's exit dropped");
  const c = make(30);
  c.exited({ code: 0, signal: null });
  assert.ok("exit" in reg.find(byPid(30)));
  await new Promise((r) => setTimeout(r, 80));
  assert.throws(() => reg.find(byPid(30)), (e: ConnectError) => e.code === Code.NotFound, "retention expired");
  reg.close();
});

test("a subscription lets go of every item it handed out (no delivered output stays reachable)", async () => {
  const { setFlagsFromString } = await import("node:v8");
  const { runInNewContext } = await import("node:vm");
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  const b = new Broadcast<{ bytes: Uint8Array }>({ maxBytes: 1 << 30, highWater: 1 << 29, lowWater: 1 << 28 }, (x) => x.bytes.byteLength, () => new Error("behind"));
  const sub = b.subscribe();
  const refs: WeakRef<object>[] = [];
  // Fewer items than the queue's compaction threshold, so only clearing each slot frees them.
  for (let i = 0; i < 100; i++) {
    const item = { bytes: new Uint8Array(1024) };
    refs.push(new WeakRef(item));
    b.publish(item);
  }
  for (let i = 0; i < 100; i++) assert.equal((await sub.next()).done, false);
  await new Promise((r) => setImmediate(r));
  gc();
  // The most recent item may still sit in a register or the last settled promise; the rest must be gone.
  const alive = refs.filter((r) => r.deref() !== undefined).length;
  assert.ok(alive <= 1, `${alive} of 100 taken items are still reachable`);
  await sub.return();
});

test("registry: a reserved slot counts against the limit until released (a burst of Starts cannot overshoot)", () => {
  const r = new ProcessRegistry(2);
  const a = r.reserve();
  const b = r.reserve();
  assert.throws(() => r.reserve(), (e: unknown) => e instanceof ConnectError && e.code === Code.ResourceExhausted);
  a();
  a(); // releasing twice frees one slot only
  const c = r.reserve();
  assert.throws(() => r.checkCapacity(), (e: unknown) => e instanceof ConnectError && e.code === Code.ResourceExhausted);
  b();
  c();
  r.checkCapacity();
  r.close();
});

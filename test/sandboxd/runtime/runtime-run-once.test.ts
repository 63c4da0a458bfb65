// The runtime's run-once verb (what template builds run their steps with): a command run to its
// end in a writable root filesystem, its exit code and output lines, its user, loopback-only
// network, timeout and abort, and nothing of a run left once it has settled.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { MAPPED_ROOT } from "../../../src/sandboxd/host/idmap.js";
import { runCgroupParent } from "../../../src/sandboxd/runtime/runc-once.js";
import type { RunOnceSpec } from "../../../src/sandboxd/runtime/runtime.js";
import { cgroupDirsLike, skipReason, testRuntime, type TestRuntime } from "../helpers/runtime.js";

describe("runtime run-once", { skip: skipReason() }, () => {
  let t: TestRuntime;
  let mnt: string;
  let upper: string;

  before(async () => {
    t = await testRuntime(226);
    const dir = join(t.dataDir, "run-layer");
    upper = join(dir, "upper");
    mnt = join(dir, "mnt");
    for (const d of [upper, join(dir, "work"), mnt]) mkdirSync(d, { recursive: true });
    chownSync(upper, MAPPED_ROOT, MAPPED_ROOT);
    const m = spawnSync("mount", ["-t", "overlay", "overlay", "-o", `lowerdir=${t.rootfs},upperdir=${upper},workdir=${join(dir, "work")}`, mnt], { encoding: "utf8" });
    assert.equal(m.status, 0, m.stderr);
  });
  after(async () => {
    if (mnt) spawnSync("umount", [mnt]);
    await t?.cleanup();
  });

  /** A run of `script` under /bin/sh as root, collecting its lines. */
  const spec = (script: string, lines: string[], x: Partial<RunOnceSpec> = {}): RunOnceSpec => ({
    runID: `t-${Math.random().toString(36).slice(2, 10)}`, rootfs: mnt, argv: ["/bin/sh", "-c", script], user: { uid: 0, gid: 0 },
    env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" }, cwd: "/", cpuCount: 1, memoryMB: 256, pidsLimit: 256, network: "loopback",
    timeoutMs: 120_000, onLine: (l) => lines.push(l), ...x,
  });

  /** Asserts no container, bundle or cgroup of a run is left. */
  const nothingLeft = () => {
    const runc = spawnSync("runc", ["--root", join(t.dataDir, "runc-build"), "list", "-q"], { encoding: "utf8" });
    assert.equal(runc.stdout.trim(), "");
    const bundles = join(t.dataDir, "runtime", "runs");
    assert.deepEqual(existsSync(bundles) ? readdirSync(bundles) : [], []);
    assert.deepEqual(cgroupDirsLike(runCgroupParent(t.dataDir)), []);
  };

  test("exit code, stdout and stderr as lines, changes kept in the rootfs, only loopback, the given user", async () => {
    const lines: string[] = [];
    const r = await t.rt.runOnce(spec("echo out; echo err >&2; echo made > /made-by-run; ls /sys/class/net; printf 'no-newline'; exit 3", lines));
    assert.deepEqual(r, { exitCode: 3, timedOut: false });
    for (const l of ["out", "err", "lo", "no-newline"]) assert.ok(lines.includes(l), `${l} in ${JSON.stringify(lines)}`);
    assert.ok(!lines.some((l) => /^(eth|veth|sb)/.test(l)), `only loopback: ${JSON.stringify(lines)}`);
    assert.equal(readFileSync(join(upper, "made-by-run"), "utf8"), "made\n");
    const who: string[] = [];
    assert.deepEqual(await t.rt.runOnce(spec("id -u; id -g; pwd", who, { user: { uid: 1000, gid: 1000 }, cwd: "/home/user" })), { exitCode: 0, timedOut: false });
    assert.deepEqual(who, ["1000", "1000", "/home/user"]);
    nothingLeft();
  });

  test("the timeout kills a run; an abort kills one; a bad run ID is refused", async () => {
    const slow = await t.rt.runOnce(spec("sleep 300", [], { timeoutMs: 500 }));
    assert.equal(slow.timedOut, true);
    assert.notEqual(slow.exitCode, 0);
    const ac = new AbortController();
    const lines: string[] = [];
    const r = await t.rt.runOnce(spec("echo started; sleep 300", lines, { onLine: (l) => (lines.push(l), l === "started" && ac.abort()) }), ac.signal);
    assert.equal(r.timedOut, false);
    assert.notEqual(r.exitCode, 0);
    await assert.rejects(t.rt.runOnce(spec("true", [], { runID: "../x" })), /run ID '\.\.\/x' is not/);
    nothingLeft();
  });
});

// The runc runtime's limits and lifecycle verbs on a real sandbox: memory and pids limits hit
// the offending process alone, freeze/thaw is a true in-memory pause, envd comes back if it dies.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { SandboxAddress } from "../../../src/sandboxd/runtime/runtime.js";
import { cgroupDirsLike, health, sh, skipReason, testRuntime, type TestRuntime } from "../helpers/runtime.js";

const skip = skipReason();
const PIDS = 128;
const MEMORY_MB = 256;
const DISK_MB = 64;

describe("runc runtime: limits, freeze and thaw", { skip }, () => {
  let t: TestRuntime;
  let sb: SandboxAddress;
  let id: string;

  before(async () => {
    t = await testRuntime(203, { pidsLimit: PIDS });
    const spec = t.spec({ memoryMB: MEMORY_MB, cpuCount: 1.5, diskSizeMB: DISK_MB });
    id = spec.sandboxID;
    sb = await t.rt.create(spec);
  });
  after(async () => {
    await t?.cleanup();
  });

  /** The value of a cgroup file of this sandbox in the hierarchy whose path contains `ctl`. */
  const cgroupFile = (ctl: string, file: string) => {
    const dir = cgroupDirsLike(id).find((d) => d.includes(`/${ctl}/`));
    assert.ok(dir, `no ${ctl} cgroup for ${id}`);
    return readFileSync(`${dir}/${file}`, "utf8").trim();
  };

  test("the cgroup carries the spec's limits", { skip: !cgroupDirsLike("").some((d) => d.includes("/memory/")) && "not cgroup v1" }, () => {
    assert.equal(cgroupFile("memory", "memory.limit_in_bytes"), String(MEMORY_MB * 1024 * 1024));
    assert.equal(cgroupFile("cpu", "cpu.cfs_quota_us"), "150000");
    assert.equal(cgroupFile("pids", "pids.max"), String(PIDS));
  });

  test("a process allocating past memoryMB is killed; envd keeps answering", async () => {
    const r = await sh(sb.ip, `python3 -c 'b = bytearray(${MEMORY_MB * 2} * 1024 * 1024); print(len(b))'`, { user: "user" });
    assert.equal(r.status, "signal: killed", `the hog was not killed: ${JSON.stringify(r)}`);
    assert.equal(r.stdout, "");
    assert.equal(await health(sb.ip), 204);
    const after = await sh(sb.ip, "echo alive");
    assert.equal(after.stdout, "alive\n");
  });

  test("writes stop at diskSizeMB with ENOSPC inside the sandbox; the host's disk is untouched; space comes back", async () => {
    const df = await sh(sb.ip, "df -BM --output=size / | tail -1");
    const size = Number(df.stdout.trim().replace(/M$/, ""));
    assert.ok(size > DISK_MB * 0.8 && size <= DISK_MB, `df / says ${df.stdout.trim()} for a ${DISK_MB} MiB disk`);
    const r = await sh(sb.ip, `dd if=/dev/zero of=/home/user/fill bs=1M count=${DISK_MB * 2} 2>&1; echo "exit $?"; du -m /home/user/fill`, { user: "user" });
    assert.match(r.stdout, /No space left on device/, r.stdout);
    assert.match(r.stdout, /exit 1/);
    const written = Number(/(\d+)\s+\/home\/user\/fill/.exec(r.stdout)?.[1]);
    assert.ok(written < DISK_MB, `${written} MiB written past a ${DISK_MB} MiB disk`);
    const image = statSync(t.storage.diskPath(id));
    assert.ok(image.blocks * 512 <= DISK_MB * 2 ** 20, `the disk image holds ${image.blocks * 512} bytes of the host's disk`);
    assert.equal(await health(sb.ip), 204);
    assert.equal((await sh(sb.ip, "rm /home/user/fill && echo ok > /home/user/after && cat /home/user/after", { user: "user" })).stdout, "ok\n");
  });

  test("a fork loop stops at the pids limit; envd keeps answering", async () => {
    const script = [
      "import os, signal, time",
      "kids = []",
      "try:",
      "    while len(kids) < 1000:",
      "        pid = os.fork()",
      "        if pid == 0:",
      "            time.sleep(60)",
      "            os._exit(0)",
      "        kids.append(pid)",
      "    print('unbounded', len(kids))",
      "except OSError as e:",
      "    print(e.errno, len(kids))",
      "for k in kids: os.kill(k, signal.SIGKILL)",
      "for k in kids: os.waitpid(k, 0)",
    ].join("\n");
    const r = await sh(sb.ip, `python3 - <<'EOF'\n${script}\nEOF`, { user: "user" });
    assert.equal(r.exitCode, 0, r.stderr);
    const [errno, count] = r.stdout.trim().split(" ");
    assert.equal(errno, "11", r.stdout); // EAGAIN from the pids controller
    assert.ok(Number(count) > 10 && Number(count) < PIDS, r.stdout);
    assert.equal(await health(sb.ip), 204);
    assert.equal((await sh(sb.ip, "echo alive")).stdout, "alive\n");
  });

  test("freeze stops every process in memory (/health times out); thaw brings it back; both idempotent", async () => {
    await sh(sb.ip, "echo before > /tmp/state");
    await t.rt.freeze(id);
    await t.rt.freeze(id);
    assert.equal(await health(sb.ip, 1000), "TimeoutError");
    assert.deepEqual((await t.rt.list()).map((s) => [s.sandboxID, s.status]), [[id, "paused"]]);
    await t.rt.thaw(id);
    await t.rt.thaw(id);
    assert.equal(await health(sb.ip), 204);
    assert.equal((await sh(sb.ip, "cat /tmp/state")).stdout, "before\n");
    assert.deepEqual((await t.rt.list()).map((s) => [s.sandboxID, s.status]), [[id, "running"]]);
    await assert.rejects(t.rt.freeze("inotthere"), /not known/);
  });

  test("envd killed inside comes back on its own", async () => {
    // envd only, not the restart loop (whose command line names envd too)
    const before = await sh(sb.ip, "pgrep -f '^/usr/lib/envd/envd'");
    await sh(sb.ip, "pkill -9 -f '^/usr/lib/envd/envd'").catch(() => undefined);
    const t0 = Date.now();
    let status: number | string = "";
    while (Date.now() - t0 < 15_000) {
      status = await health(sb.ip, 500);
      if (status === 204) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status, 204);
    const now = await sh(sb.ip, "pgrep -f '^/usr/lib/envd/envd'");
    assert.notEqual(now.stdout, before.stdout, "envd's pid did not change");
  });

  test("remove of a frozen sandbox kills and removes it", async () => {
    await t.rt.freeze(id);
    await t.rt.remove(id);
    assert.deepEqual(await t.rt.list(), []);
    assert.deepEqual(cgroupDirsLike(id), []);
  });
});

// The cheap liveness look the reconcile loop uses instead of `runc list`: runc's state file names
// the init's pid and start time; a live process with that start time is alive, a dead one, a pid
// reused by another process, or a missing state file is not, and a state file rewritten by runc
// (rename over it) is read again.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InitWatch, procStat } from "../../../src/sandboxd/runtime/liveness.js";

/** Writes runc's state file for `id` the way runc does: a new file renamed over the old one. */
function writeState(root: string, id: string, body: string): void {
  mkdirSync(join(root, id), { recursive: true });
  const tmp = join(root, id, "state-tmp");
  writeFileSync(tmp, body);
  renameSync(tmp, join(root, id, "state.json"));
}

const stateOf = (pid: number, start: string) => JSON.stringify({ id: "x", init_process_pid: pid, init_process_start: Number(start), config: { rootfs: "/" } });

describe("InitWatch (runc's state file and /proc)", () => {
  test("alive while the init runs; not when it exits, when its pid's start time differs, or when runc has no state", async () => {
    const root = mkdtempSync(join(tmpdir(), "liveness-"));
    const children: ChildProcess[] = [];
    try {
      const a = spawn("sleep", ["600"], { stdio: "ignore" });
      const b = spawn("sleep", ["600"], { stdio: "ignore" });
      children.push(a, b);
      await Promise.all([once(a, "spawn"), once(b, "spawn")]);
      const sa = procStat(a.pid!);
      const sb = procStat(b.pid!);
      assert.ok(sa && sb, "a running process has a state and a start time");
      const watch = new InitWatch(root);

      writeState(root, "one", stateOf(a.pid!, sa.start));
      assert.equal(watch.alive("one"), true);
      writeState(root, "reused", stateOf(a.pid!, String(Number(sa.start) + 1)));
      assert.equal(watch.alive("reused"), false, "the pid runs, but it is not the process runc started");
      assert.equal(watch.alive("none"), false, "no state file: runc has no such container");

      writeState(root, "one", stateOf(b.pid!, sb.start));
      a.kill("SIGKILL");
      await once(a, "exit");
      assert.equal(watch.alive("one"), true, "a rewritten state file is read again (now naming b)");

      b.kill("SIGKILL");
      await once(b, "exit");
      assert.equal(watch.alive("one"), false, "its init exited");

      writeState(root, "half", "{\"init_process_pid\": 12");
      assert.equal(watch.alive("half"), true, "a file runc has not finished decides nothing");
      rmSync(join(root, "one"), { recursive: true });
      assert.equal(watch.alive("one"), false, "a container runc deleted");
    } finally {
      for (const c of children) c.kill("SIGKILL");
      rmSync(root, { recursive: true, force: true });
    }
  });
});

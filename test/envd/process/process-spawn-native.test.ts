// The addon's fork-free spawn (native/spawn/spawn.c) as src/envd/process/spawner.ts uses it: what
// the child gets (ids, groups, directory, environment, session, default signal dispositions,
// nothing blocked), PATH search, exec errors, exit codes and signals, and no descriptor left.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { closeSync, openSync, readdirSync, readFileSync, readSync, writeFileSync, chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { addonExtra, type SpawnOptions } from "../../../src/envd/platform/addon.js";
import { nativeLine } from "../../../src/envd/process/wrapper.js";

const spawn = addonExtra("spawn")!;
const pipe = addonExtra("pipe")!;
const PATH = "PATH=/usr/local/bin:/usr/bin:/bin";

function ioniceOf(pid: number): string {
  return execFileSync("ionice", ["-p", String(pid)], { encoding: "utf8" }).trim();
}

function oomOf(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/oom_score_adj`, "utf8"));
}

/** Runs one command with stdout captured; resolves with its output and how it ended. */
function run(file: string, args: string[], opts: { env?: string[]; cwd?: string; uid?: number; gid?: number; options?: SpawnOptions } = {}) {
  const nul = openSync("/dev/null", "r");
  const [r, w] = pipe(0);
  let pid = 0;
  try {
    return new Promise<{ pid: number; out: string; code: number; signal: number }>((resolve) => {
      pid = spawn(file, [file, ...args], opts.env ?? [PATH], opts.cwd ?? "", opts.uid ?? null, opts.gid ?? null, [nul, w, w], true, (code, signal) => {
        const chunks: Buffer[] = [];
        const buf = Buffer.alloc(65536);
        for (let n; (n = readSync(r, buf)) > 0; ) chunks.push(Buffer.from(buf.subarray(0, n)));
        closeSync(r);
        resolve({ pid, out: Buffer.concat(chunks).toString(), code, signal });
      }, opts.options);
      closeSync(w);
    });
  } catch (e) {
    closeSync(r);
    closeSync(w);
    throw e;
  } finally {
    closeSync(nul);
  }
}

test("native spawn: ids, no supplementary groups, cwd, exactly the given environment, own session", async () => {
  const r = await run("sh", ["-c", 'id -u; id -g; id -G; pwd; env | sort; cut -d" " -f6 /proc/$$/stat; echo $$'], {
    env: [PATH, "FOO=bar baz"],
    cwd: "/tmp",
    uid: 1001,
    gid: 1001,
  });
  const lines = r.out.trim().split("\n");
  assert.deepEqual(lines.slice(0, 4), ["1001", "1001", "1001", "/tmp"]);
  assert.ok(lines.includes("FOO=bar baz") && lines.includes(PATH), r.out);
  assert.ok(!lines.some((l) => l.startsWith("HOME=")), "nothing from envd's own environment");
  const [session, shellPid] = lines.slice(-2).map(Number);
  assert.equal(shellPid, r.pid, "the pid reported is the exec'd command's");
  assert.equal(session, r.pid, "leader of its own session");
  assert.equal(r.code, 0);
});

test("native spawn: ids are unsigned 32-bit; one that cannot be applied is refused, never kept as root", async () => {
  const big = await run("sh", ["-c", "id -u; id -g; id -G"], { uid: 3_000_000_000, gid: 3_000_000_001, options: { groups: [3_000_000_001, 4_000_000_000] } });
  assert.deepEqual(big.out.trim().split("\n"), ["3000000000", "3000000001", "3000000001 4000000000"]);
  for (const bad of [-1, 2 ** 32 - 1, 2 ** 32, 1.5, Number.NaN]) {
    assert.throws(() => spawn("true", ["true"], [PATH], "", bad, 1001, [3, 3, 3], true, () => undefined), RangeError, `uid ${bad}`);
    assert.throws(() => spawn("true", ["true"], [PATH], "", 1001, bad, [3, 3, 3], true, () => undefined), RangeError, `gid ${bad}`);
    assert.throws(() => spawn("true", ["true"], [PATH], "", 1001, 1001, [3, 3, 3], true, () => undefined, { groups: [bad] }), RangeError, `group ${bad}`);
  }
});

test("native spawn options: supplementary groups, niceness, IO class and OOM score set in the child", async () => {
  const probe = 'id -G; cut -d" " -f19 /proc/$$/stat; ionice -p $$; cat /proc/$$/oom_score_adj';
  const r = await run("sh", ["-c", probe], { uid: 1001, gid: 1001, options: { groups: [1001, 27, 100], nice: 7, ioprio: (2 << 13) | 4, oomScoreAdj: 100 } });
  assert.deepEqual(r.out.trim().split("\n"), ["1001 27 100", "7", "best-effort: prio 4", "100"]);
  // Without options: the child keeps what the spawner has (this test runs with its defaults).
  const plain = await run("sh", ["-c", probe], { uid: 1001, gid: 1001 });
  assert.deepEqual(plain.out.trim().split("\n"), ["1001", "0", `none: prio ${ioniceOf(process.pid).split("prio ")[1]}`, String(oomOf(process.pid))]);
  assert.throws(() => spawn("true", ["true"], [PATH], "", null, null, [3, 3, 3], true, () => undefined, { groups: Array.from({ length: 300 }, (_, i) => i) }), /at most 256 groups/);
});

test("the native exec line resets what envd runs with (its unit: nice -20, realtime IO) and keeps every group", () => {
  const user = { name: "user", uid: 1001, gid: 1001, home: "/home/user", shell: "/bin/bash", groups: [1001, 27] };
  const tools = { sh: "/bin/sh", nicePrefix: [], ionicePrefix: [], euid: 0 };
  assert.deepEqual(nativeLine("ls", ["-l"], user, { ...tools, niceness: -20, ioDefault: false }), {
    file: "ls",
    args: ["-l"],
    uid: 1001,
    gid: 1001,
    options: { oomScoreAdj: 100, nice: 0, ioprio: (2 << 13) | 4, groups: [1001, 27] },
  });
  assert.deepEqual(nativeLine("ls", [], user, { ...tools, niceness: 0, ioDefault: true }).options, { oomScoreAdj: 100, groups: [1001, 27] });
  // envd running as the user itself changes no ids or groups.
  assert.deepEqual(nativeLine("ls", [], user, { ...tools, euid: 1001, niceness: 0, ioDefault: true }), { file: "ls", args: [], options: { oomScoreAdj: 100 } });
});

test("native spawn: every signal at its default and none blocked (envd ignores SIGPIPE; the child must not)", async () => {
  const r = await run("grep", ["-E", "^Sig(Ign|Blk)", "/proc/self/status"]);
  assert.match(r.out, /SigBlk:\s+0+\n/);
  assert.match(r.out, /SigIgn:\s+0+\n/);
});

test("native spawn: exit codes and signals are reported like Node's", async () => {
  assert.deepEqual((({ code, signal }) => ({ code, signal }))(await run("sh", ["-c", "exit 7"])), { code: 7, signal: 0 });
  const killed = await run("sh", ["-c", "kill -TERM $$; sleep 5"]);
  assert.equal(killed.signal, 15);
  assert.equal(killed.code, -1);
});

test("native spawn: PATH is searched in the child's environment, and exec errors are thrown coded", async () => {
  const dir = mkdtempSync(join(tmpdir(), "envd-spawn-"));
  try {
    writeFileSync(join(dir, "hello"), "#!/bin/sh\necho from-path\n");
    chmodSync(join(dir, "hello"), 0o755);
    writeFileSync(join(dir, "noexec"), "#!/bin/sh\n");
    chmodSync(join(dir, "noexec"), 0o644);
    assert.equal((await run("hello", [], { env: [`PATH=/nonexistent:${dir}`] })).out, "from-path\n");
    const nul = openSync("/dev/null", "r");
    try {
      const fds = [nul, nul, nul];
      assert.throws(() => spawn("no-such-command-here", ["x"], [PATH], "", null, null, fds, true, () => undefined), { code: "ENOENT" });
      assert.throws(() => spawn(join(dir, "noexec"), ["x"], [PATH], "", null, null, fds, true, () => undefined), { code: "EACCES" });
      assert.throws(() => spawn("/bin/true", ["x"], [PATH], "/no/such/dir", null, null, fds, true, () => undefined), { code: "ENOENT" });
      assert.throws(() => spawn("/bin/true", ["x"], [PATH], "", null, null, [0, 1, 2], true, () => undefined), RangeError);
    } finally {
      closeSync(nul);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("native spawn: a hundred spawns leave no descriptor behind", async () => {
  const before = readdirSync("/proc/self/fd").length;
  for (let i = 0; i < 100; i++) await run("/bin/true", []);
  // The exit watcher's pidfd is closed once libuv has closed its poll handle (next loop turn).
  await new Promise((r) => setImmediate(r));
  assert.ok(readdirSync("/proc/self/fd").length <= before + 1, `${readdirSync("/proc/self/fd").length} fds, ${before} before`);
});

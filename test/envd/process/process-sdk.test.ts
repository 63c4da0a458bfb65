import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { CommandExitError, TimeoutError, type Sandbox } from "e2b";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { sdkSandbox, tempDir } from "../helpers/clients.js";

let d: Daemon;
let sbx: Sandbox;

before(async () => {
  d = await startDaemon();
  sbx = await sdkSandbox(d.url);
});
after(async () => {
  await d?.stop();
});

const alive = async (pid: number): Promise<boolean> => {
  const r = await sbx.commands.run(`kill -0 ${pid} 2>/dev/null && echo yes || echo no`, { user: "root" });
  return r.stdout.trim() === "yes";
};

test("run: output, default user and cwd, envs that do not leak, user root", async () => {
  const r = await sbx.commands.run('whoami; pwd; echo "$FOO"; echo oops >&2', { envs: { FOO: "bar baz" } });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "user\n/home/user\nbar baz\n");
  assert.equal(r.stderr, "oops\n");
  const again = await sbx.commands.run('echo "[$FOO]"');
  assert.equal(again.stdout, "[]\n", "per-command envs must not leak");
  const root = await sbx.commands.run("whoami; echo $HOME", { user: "root" });
  assert.equal(root.stdout, "root\n/root\n");
});

test("run: cwd, and a missing cwd is an InvalidArgumentError", async () => {
  const t = await tempDir("proc-cwd");
  try {
    const r = await sbx.commands.run("pwd", { cwd: t.path });
    assert.equal(r.stdout.trim(), t.path);
    await assert.rejects(sbx.commands.run("pwd", { cwd: `${t.path}/missing` }), (e: Error) => {
      assert.equal(e.name, "InvalidArgumentError");
      assert.match(e.message, /cwd '.*missing' does not exist/);
      return true;
    });
  } finally {
    await t.cleanup();
  }
});

test("run: non-zero exit throws CommandExitError; a missing command exits 127", async () => {
  await assert.rejects(sbx.commands.run("echo partial; exit 3"), (e: unknown) => {
    assert.ok(e instanceof CommandExitError);
    assert.equal(e.exitCode, 3);
    assert.equal(e.stdout, "partial\n");
    assert.equal(e.error, "exit status 3");
    return true;
  });
  await assert.rejects(sbx.commands.run("definitely-not-a-command-xyz"), (e: unknown) => {
    assert.ok(e instanceof CommandExitError);
    assert.equal(e.exitCode, 127);
    return true;
  });
});

test("run: onStdout / onStderr callbacks see the output as it comes", async () => {
  const out: string[] = [];
  const err: string[] = [];
  const r = await sbx.commands.run("for i in 1 2 3; do echo out$i; echo err$i >&2; done", {
    onStdout: (s) => void out.push(s),
    onStderr: (s) => void err.push(s),
  });
  assert.equal(out.join(""), "out1\nout2\nout3\n");
  assert.equal(err.join(""), "err1\nerr2\nerr3\n");
  assert.equal(r.stdout, out.join(""));
});

test("run: timeoutMs gives a TimeoutError and the process is killed", async () => {
  const started = Date.now();
  const marker = `envd-timeout-${process.pid}-${Date.now()}`;
  await assert.rejects(sbx.commands.run(`exec -a ${marker} sleep 30`, { timeoutMs: 1000 }), (e: unknown) => {
    assert.ok(e instanceof TimeoutError, String(e));
    return true;
  });
  assert.ok(Date.now() - started < 10_000);
  let survivors = "";
  for (let i = 0; i < 20; i++) {
    // The bracket keeps the pattern from matching pgrep's own shell command line.
    survivors = (await sbx.commands.run(`pgrep -f '[e]${marker.slice(1)}' || true`)).stdout.trim();
    if (!survivors) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(survivors, "", "the timed-out process must be killed");
});

test("background: list, stdin, closeStdin, wait", async () => {
  const h = await sbx.commands.run("cat; echo done", { background: true, stdin: true, envs: { X: "1" }, timeoutMs: 30_000 });
  const listed = (await sbx.commands.list()).find((p) => p.pid === h.pid);
  assert.ok(listed, "the background process is listed");
  assert.equal(listed.cmd, "/bin/bash");
  assert.deepEqual(listed.args, ["-l", "-c", "cat; echo done"]);
  assert.deepEqual(listed.envs, { X: "1" });
  assert.equal(listed.cwd, undefined, "cwd only when sent");
  await sbx.commands.sendStdin(h.pid, "hello ");
  await sbx.commands.sendStdin(h.pid, "");
  await h.sendStdin("world\n");
  await sbx.commands.closeStdin(h.pid);
  const r = await h.wait();
  assert.equal(r.stdout, "hello world\ndone\n");
  assert.equal((await sbx.commands.list()).find((p) => p.pid === h.pid), undefined, "gone from the list after its end");
});

test("sendStdin without stdin enabled is an error", async () => {
  const h = await sbx.commands.run("sleep 5", { background: true });
  try {
    await assert.rejects(sbx.commands.sendStdin(h.pid, "x"), /stdin not enabled or closed/);
  } finally {
    await h.kill();
  }
});

test("kill: true, the process is reaped (kill -0 fails); unknown pid: false", async () => {
  const h = await sbx.commands.run("sleep 300", { background: true, timeoutMs: 0 });
  assert.equal(await alive(h.pid), true);
  assert.equal(await sbx.commands.kill(h.pid), true);
  assert.equal(await alive(h.pid), false, "a killed process must be reaped, not a zombie");
  await assert.rejects(h.wait(), (e: unknown) => e instanceof CommandExitError && e.exitCode === -1 && e.error === "signal: killed");
  assert.equal(await sbx.commands.kill(h.pid), false);
  assert.equal(await sbx.commands.kill(999_999), false);
});

test("connect after the Start stream was dropped: live output, then the end", async () => {
  const h = await sbx.commands.run("read line; echo got:$line; sleep 0.2; echo bye", { background: true, stdin: true, timeoutMs: 30_000 });
  await h.disconnect();
  assert.ok((await sbx.commands.list()).some((p) => p.pid === h.pid), "disconnect must not kill the process");
  const seen: string[] = [];
  const h2 = await sbx.commands.connect(h.pid, { onStdout: (s) => void seen.push(s) });
  await sbx.commands.sendStdin(h.pid, "ping\n");
  const r = await h2.wait();
  assert.equal(r.exitCode, 0);
  assert.equal(seen.join(""), "got:ping\nbye\n");
  await assert.rejects(sbx.commands.connect(999_999));
});

test("two subscribers (Start and Connect) both get all output", async () => {
  const h = await sbx.commands.run("read x; for i in $(seq 1 200); do echo line$i; done", { background: true, stdin: true });
  const other = await sbx.commands.connect(h.pid);
  await sbx.commands.sendStdin(h.pid, "go\n");
  const [a, b] = await Promise.all([h.wait(), other.wait()]);
  const expected = Array.from({ length: 200 }, (_, i) => `line${i + 1}\n`).join("");
  assert.equal(a.stdout, expected);
  assert.equal(b.stdout, expected);
});

test("the OOM score of a user process is raised to 100", async () => {
  // A direct exec gets its score from envd right after the spawn (microseconds later), so read
  // it from a child forked after a short pause; the wrapper path sets it before the exec.
  const r = await sbx.commands.run("sleep 0.05; cat /proc/self/oom_score_adj");
  assert.equal(r.stdout.trim(), "100");
});

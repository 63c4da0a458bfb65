// Sandbox logs (GET /sandboxes/{id}/logs, /v2/...) and the published e2b CLI against a real
// sandboxd: list, info, exec, logs, metrics, pause, resume and kill as a user types them, and a
// template built from a Dockerfile with a terminal opened on a sandbox of it.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pty from "node-pty";
import { api } from "../helpers/api-client.js";
import { NODE, ROOT, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/sdk-run.js";

const RUNC = spawnSync("runc", ["--version"]).status === 0;
const CLI = join(ROOT, "node_modules", "@e2b", "cli", "dist", "index.js");

/** The environment the CLI gets: the three lines `serve` printed, nothing of a real E2B account. */
const cliEnv = (s: Sandboxd) => ({ ...process.env, ...s.sdkEnv, E2B_DEBUG: "", E2B_API_URL: "", E2B_ACCESS_TOKEN: "", NO_COLOR: "1", FORCE_COLOR: "0", CI: "1" });

/** Runs the published CLI with what `serve` printed; resolves with its exit code and output. */
function cli(s: Sandboxd, args: string[], cwd = ROOT): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(NODE, [CLI, ...args], {
      cwd,
      env: cliEnv(s),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c));
    child.stderr.on("data", (c: Buffer) => (out += c));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

/** Writes `data` into the sandbox's console the way sandbox root can: a copy of PID 1's stdout (pidfd_getfd). */
/**
 * Sandbox root trying to write to PID 1's stdout (the console): through pidfd_getfd (refused by
 * the seccomp profile) and by reopening /proc/1/fd/1 (the file belongs to host root).
 */
const WRITE_TO_CONSOLE_PY = [
  "import ctypes, os, sys",
  "libc = ctypes.CDLL(None, use_errno=True)",
  "fd = libc.syscall(438, os.pidfd_open(1), 1, 0)",
  "print('pidfd_getfd', 'refused: ' + os.strerror(ctypes.get_errno()) if fd < 0 else 'allowed')",
  "try:",
  "    os.open('/proc/1/fd/1', os.O_WRONLY | os.O_APPEND)",
  "    print('reopen allowed')",
  "except OSError as e:",
  "    print('reopen refused: ' + e.strerror)",
].join("\n");

describe("sandbox logs and the published e2b CLI against a real sandboxd", { skip: RUNC ? false : "runc is not installed" }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  let id: string;

  before(async () => {
    s = await startSandboxd();
    ca = readFileSync(s.caFile);
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create({ timeoutMs: 300_000, metadata: { suite: "cli" } });
      const r = await sbx.commands.run("echo made");
      console.log(JSON.stringify({ id: sbx.sandboxId, out: r.stdout }));
    `);
    assert.equal(got.out, "made\n");
    id = got.id;
  });
  after(async () => {
    await s?.stop();
  });

  test("logs: envd's lines as entries (v1 and v2), with v2's level, search, direction, cursor and limit", async () => {
    const v1 = await api(s, ca, "GET", `/sandboxes/${id}/logs`);
    assert.equal(v1.status, 200, v1.body);
    assert.equal(v1.json.logs.length, v1.json.logEntries.length);
    const listening = v1.json.logEntries.find((e: { message: string }) => e.message === "listening");
    assert.ok(listening, `envd's start is logged: ${v1.body.slice(0, 500)}`);
    assert.equal(listening.level, "info");
    assert.equal(listening.fields.logger, "envd");
    assert.equal(listening.fields.port, "49983");
    const start = v1.json.logEntries.find((e: { fields: Record<string, string> }) => e.fields.path === "/process.Process/Start");
    assert.ok(start, "the command's request is logged");
    assert.equal(start.message, "request");
    assert.equal(JSON.parse(v1.json.logs[0].line).msg, v1.json.logEntries[0].message, "v1's lines are the lines as written");
    assert.ok(!v1.json.logEntries.some((e: { fields: Record<string, string> }) => e.fields.path === "/health" || e.fields.path === "/metrics"), "the host's probes are not in the sandbox's log");
    const times = v1.json.logEntries.map((e: { timestamp: string }) => Date.parse(e.timestamp));
    assert.deepEqual(times, [...times].sort((a, b) => a - b), "oldest first");

    const back = await api(s, ca, "GET", `/v2/sandboxes/${id}/logs?direction=backward&limit=2`);
    assert.equal(back.status, 200, back.body);
    assert.equal(back.json.logs.length, 2);
    assert.deepEqual(back.json.logs.map((e: { message: string }) => e.message), v1.json.logEntries.slice(-2).reverse().map((e: { message: string }) => e.message));
    const searched = await api(s, ca, "GET", `/v2/sandboxes/${id}/logs?search=listen`);
    assert.deepEqual(searched.json.logs.map((e: { message: string }) => e.message), ["listening"]);
    const warnOnly = await api(s, ca, "GET", `/v2/sandboxes/${id}/logs?level=warn`);
    assert.equal(warnOnly.status, 200);
    assert.ok(warnOnly.json.logs.every((e: { level: string }) => e.level === "warn" || e.level === "error"));
    const after = await api(s, ca, "GET", `/v2/sandboxes/${id}/logs?cursor=${times[times.length - 1] + 1}`);
    assert.deepEqual(after.json.logs, [], "nothing at or after a cursor past the last entry");
    const fromStart = await api(s, ca, "GET", `/sandboxes/${id}/logs?start=${times[1]}&limit=1`);
    assert.equal(fromStart.json.logEntries.length, 1);
    assert.equal(Date.parse(fromStart.json.logEntries[0].timestamp) >= times[1], true);
  });

  test("logs: bad parameters are 400, unknown sandboxes 404, and no key 401", async () => {
    for (const q of ["limit=-1", "limit=abc", "cursor=1.5", "direction=sideways", "level=loud", "cursor=99999999999999999999"]) {
      const r = await api(s, ca, "GET", `/v2/sandboxes/${id}/logs?${q}`);
      assert.equal(r.status, 400, `${q}: ${r.body}`);
      assert.equal(r.json.code, 400);
      assert.match(r.json.message, /^validation error: parameter/);
    }
    assert.equal((await api(s, ca, "GET", `/sandboxes/${id}/logs?start=-5`)).status, 400);
    const unknown = await api(s, ca, "GET", `/sandboxes/inotthere0000000000000/logs`);
    assert.equal(unknown.status, 404);
    assert.match(unknown.json.message, /doesn't exist or you don't have access to it/);
    assert.equal((await api(s, ca, "GET", `/v2/sandboxes/${id}/logs`, { key: null })).status, 401);
  });

  test("sandbox root cannot write into the console; what lands there (a replaced envd's lines) is on the sandbox's own disk and reads back as inert entries", async () => {
    const consoleFile = join(s.dataDir, "sandboxes", id, "disk", "console.log");
    // the console is on the sandbox's disk (a filesystem of its own), not on the data dir's
    assert.notEqual(statSync(consoleFile).dev, statSync(s.dataDir).dev);
    const lines = [
      '{"level":"constructor","time":"not a time","msg":"__proto__","__proto__":{"polluted":"yes"},"n":{"deep":[1,2]}}',
      '{"level":"error","time":"1970-01-01T00:00:00.000Z","msg":"claims to be old"}',
      "plain text \u0000 with a NUL and \u001b[31mANSI\u001b[0m",
      "x".repeat(40_000),
    ].join("\n") + "\n";
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.connect(${JSON.stringify(id)});
      const script = ${JSON.stringify(WRITE_TO_CONSOLE_PY)};
      await sbx.files.write("/tmp/w.py", script);
      const r = await sbx.commands.run("sudo python3 /tmp/w.py");
      console.log(JSON.stringify({ out: r.stdout }));
    `);
    assert.equal(got.out, "pidfd_getfd refused: Operation not permitted\nreopen refused: Permission denied\n");
    // what a sandbox can still put there (envd's own lines, or an envd it replaced), written as it would
    appendFileSync(consoleFile, lines);
    // invalid UTF-8 straight into the file, as a sandbox could write it too
    appendFileSync(consoleFile, Buffer.from([0xff, 0xfe, 0x0a, 0xc3, 0x28, 0x0a]));
    const r = await api(s, ca, "GET", `/sandboxes/${id}/logs`);
    assert.equal(r.status, 200, r.body);
    const entries = r.json.logEntries as { timestamp: string; level: string; message: string; fields: Record<string, string> }[];
    const proto = entries.find((e) => e.message === "__proto__");
    assert.ok(proto);
    assert.equal(proto.level, "info", "an unknown level reads as info");
    assert.equal(proto.fields.n, '{"deep":[1,2]}', "fields are strings");
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    const old = entries.find((e) => e.message === "claims to be old");
    assert.ok(old && Date.parse(old.timestamp) > Date.parse("2026-01-01"), "a line cannot claim to be older than the one before it");
    const long = entries.find((e) => e.message.startsWith("xxxx"));
    assert.equal(long?.message.length, 16 * 1024, "long lines are cut");
    assert.ok(entries.some((e) => e.message.includes("\u0000 with a NUL")));
    const again = await api(s, ca, "GET", `/v2/sandboxes/${id}/logs?direction=backward&limit=1000`);
    assert.equal(again.status, 200);
    assert.ok(JSON.stringify(again.json).length < 4 * 1024 * 1024);
  });

  test("the e2b CLI: list, info, exec, logs, metrics, pause, resume, kill", async () => {
    const list = await cli(s, ["sandbox", "list", "--format", "json"]);
    assert.equal(list.code, 0, list.out);
    const listed = JSON.parse(list.out.slice(list.out.indexOf("["))) as { sandboxId: string; metadata: Record<string, string>; state: string }[];
    const mine = listed.find((x) => x.sandboxId === id);
    assert.deepEqual(mine?.metadata, { suite: "cli" });
    assert.equal(mine?.state, "running");

    const info = await cli(s, ["sandbox", "info", id]);
    assert.equal(info.code, 0, info.out);
    assert.match(info.out, new RegExp(`Sandbox ID: ${id}`));
    assert.match(info.out, /State: running/);

    const exec = await cli(s, ["sandbox", "exec", id, "--", "sh", "-c", "echo $((6*7)) from $(hostname)"]);
    assert.equal(exec.code, 0, exec.out);
    assert.equal(exec.out.trim(), `42 from ${id}`);

    const logs = await cli(s, ["sandbox", "logs", id]);
    assert.equal(logs.code, 0, logs.out);
    assert.match(logs.out, /listening/);
    assert.match(logs.out, /\/process\.Process\/Start/);

    // sandboxd reads envd's metrics every 5 s: the first sample may still be on its way
    let metrics = await cli(s, ["sandbox", "metrics", id]);
    for (let i = 0; i < 12 && metrics.code === 0 && !/CPU:/.test(metrics.out); i++) {
      await new Promise((r) => setTimeout(r, 1000));
      metrics = await cli(s, ["sandbox", "metrics", id]);
    }
    assert.equal(metrics.code, 0, metrics.out);
    assert.match(metrics.out, /CPU: .*Memory: .*Disk:/);

    const pause = await cli(s, ["sandbox", "pause", id]);
    assert.match(pause.out, /has been paused/);
    const paused = await cli(s, ["sandbox", "list", "--state", "paused", "--format", "json"]);
    assert.ok((JSON.parse(paused.out.slice(paused.out.indexOf("["))) as { sandboxId: string }[]).some((x) => x.sandboxId === id), paused.out);
    assert.equal((await api(s, ca, "GET", `/sandboxes/${id}/logs`)).status, 200, "a paused sandbox's logs can be read");
    const resume = await cli(s, ["sandbox", "resume", id]);
    assert.match(resume.out, /has been resumed/);
    assert.equal((await cli(s, ["sandbox", "exec", id, "--", "true"])).code, 0);

    const kill = await cli(s, ["sandbox", "kill", id]);
    assert.match(kill.out, /has been killed/);
    assert.equal((await api(s, ca, "GET", `/sandboxes/${id}`)).status, 404);
    assert.equal((await api(s, ca, "GET", `/sandboxes/${id}/logs`)).status, 404, "a killed sandbox's logs are gone with it");
    const none = await cli(s, ["sandbox", "list"]);
    assert.doesNotMatch(none.out, new RegExp(id));
  });

  test("the e2b CLI: template create from a Dockerfile, sandbox create with a terminal on it (a PTY through the proxy), template delete", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sandboxd-cli-template-"));
    const name = `clitpl${process.pid}`;
    try {
      writeFileSync(join(dir, "e2b.Dockerfile"), "FROM e2bdev/base\nCOPY hello.txt /home/user/hello.txt\nRUN echo built by RUN > /home/user/built.txt\n");
      writeFileSync(join(dir, "hello.txt"), "copied by COPY\n");
      const made = await cli(s, ["template", "create", name, "--cpu-count", "1", "--memory-mb", "512"], dir);
      assert.equal(made.code, 0, made.out);
      const list = await cli(s, ["template", "list", "--format", "json"]);
      assert.equal(list.code, 0, list.out);
      assert.ok(list.out.includes(`"${name}"`), list.out);

      // what a user types: a terminal in a new sandbox of the template, then `exit`
      const term = pty.spawn(NODE, [CLI, "sandbox", "create", name], { cols: 100, rows: 30, cwd: ROOT, env: cliEnv(s) as Record<string, string> });
      let screen = "";
      term.onData((d) => (screen += d));
      const exited = new Promise<number>((r) => term.onExit((e) => r(e.exitCode)));
      const see = async (re: RegExp, what: string) => {
        for (let i = 0; i < 300 && !re.test(screen); i++) await new Promise((r) => setTimeout(r, 100));
        assert.match(screen, re, `${what}; the terminal showed:\n${screen.slice(-2000)}`);
      };
      try {
        await see(/user@i[a-z0-9]{20}\S*:\S*\$ /, "a shell prompt as user in the sandbox");
        term.write("cat ~/hello.txt ~/built.txt; echo $((6*7))-$(tty)\r");
        await see(/copied by COPY\r*\nbuilt by RUN\r*\n42-\/dev\/pts\/\d+/, "the template's files and a terminal");
        term.write("exit\r");
        assert.equal(await exited, 0, screen.slice(-2000));
      } finally {
        term.kill();
      }
      const sandboxID = /user@(i[a-z0-9]{20})/.exec(screen)![1];
      // once its terminal closes the CLI shortens the sandbox's timeout to 1 s: the evictor ends it
      let status = 200;
      for (let i = 0; i < 100 && status !== 404; i++) {
        await new Promise((r) => setTimeout(r, 100));
        status = (await api(s, ca, "GET", `/sandboxes/${sandboxID}`)).status;
      }
      assert.equal(status, 404, "the sandbox is gone within 10 s of its 1 s timeout");

      const deleted = await cli(s, ["template", "delete", name, "--yes"]);
      assert.equal(deleted.code, 0, deleted.out);
      const after = await cli(s, ["template", "list", "--format", "json"]);
      assert.ok(!after.out.includes(`"${name}"`), after.out);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const LOG_MODULE = resolve(fileURLToPath(import.meta.url), "../../../src/common/log.js");

/** Runs `body` in a child process with `log` made by createJsonLogger(opts) writing to a file; returns the lines. */
function run(opts: object, body: string): { lines: Record<string, unknown>[]; raw: string; status: number | null; stderr: string } {
  const dir = mkdtempSync(join(tmpdir(), "log-test-"));
  try {
    const file = join(dir, "out");
    const script = `
      import { openSync } from "node:fs";
      import { createJsonLogger } from ${JSON.stringify(LOG_MODULE)};
      const fd = openSync(${JSON.stringify(file)}, "w");
      const log = createJsonLogger({ fd, ...${JSON.stringify(opts)} });
      ${body}`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 20_000 });
    let raw = "";
    try {
      raw = readFileSync(file, "utf8");
    } catch {
      // the child failed before opening it; status and stderr say why
    }
    const lines = raw.split("\n").filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    return { lines, raw, status: r.status, stderr: r.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("lines are pino's format: level label, ISO time, logger name, fields, msg; below the level nothing", () => {
  const r = run({ level: "info", name: "envd" }, `
    log.debug({ a: 1 }, "hidden");
    log.info({ port: 49983, path: "/health" }, "listening");
    log.warn("just a message");
    log.error({ n: 1n, when: undefined, nested: { x: [1, "two"] } });`);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.lines.length, 3);
  const [a, b, c] = r.lines;
  assert.deepEqual(Object.keys(a), ["level", "time", "logger", "port", "path", "msg"]);
  assert.equal(a.level, "info");
  assert.match(String(a.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal(a.logger, "envd");
  assert.equal(a.port, 49983);
  assert.equal(a.msg, "listening");
  assert.deepEqual(b, { level: "warn", time: b.time, logger: "envd", msg: "just a message" });
  assert.deepEqual(c, { level: "error", time: c.time, logger: "envd", n: "1", nested: { x: [1, "two"] } });
});

test("errors keep type, message and stack; cycles and throwing getters do not break a line", () => {
  const r = run({ level: "trace", name: "x" }, `
    const cyc = { name: "c" }; cyc.self = cyc;
    const bad = { ok: 1, get boom() { throw new Error("getter"); } };
    log.error({ err: new TypeError("no such thing") }, "failed");
    log.info({ cyc, bad }, "odd");
    log.trace("t"); log.fatal("f");`);
  assert.equal(r.status, 0, r.stderr);
  const err = r.lines[0].err as Record<string, unknown>;
  assert.equal(err.type, "TypeError");
  assert.equal(err.message, "no such thing");
  assert.match(String(err.stack), /TypeError: no such thing/);
  assert.deepEqual(r.lines[1].cyc, { name: "c", self: "[Circular]" });
  assert.deepEqual(r.lines[1].bad, { ok: 1, boom: "[Unreadable]" });
  assert.deepEqual(r.lines.slice(2).map((l) => l.level), ["trace", "fatal"]);
});

test("redacted paths are removed (top level, one level down, bracketed) and the caller's object is untouched", () => {
  const r = run({ level: "info", name: "sandboxd", redact: ["apiKey", "*.token", 'headers["x-api-key"]'] }, `
    const fields = { apiKey: "K1", team: { token: "T1", id: "t" }, headers: { "x-api-key": "K2", host: "h" }, keep: "yes" };
    log.info(fields, "req");
    log.info({ stillThere: JSON.stringify(fields) }, "after");`);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(r.lines[0], { level: "info", time: r.lines[0].time, logger: "sandboxd", team: { id: "t" }, headers: { host: "h" }, keep: "yes", msg: "req" });
  for (const secret of ["K1", "T1", "K2"]) assert.ok(String(r.lines[1].stillThere).includes(secret), "the object passed in keeps its fields");
  assert.ok(!r.raw.split("\n")[0].includes("K1"));
});

test("every line logged before an immediate exit is written, in order; silent writes nothing", () => {
  const r = run({ level: "info", name: "x" }, `for (let i = 0; i < 5000; i++) log.info({ i }, "line"); process.exit(3);`);
  assert.equal(r.status, 3);
  assert.equal(r.lines.length, 5000);
  assert.ok(r.lines.every((l, i) => l.i === i));
  const quiet = run({ level: "silent", name: "x" }, `log.fatal("no"); log.error({ a: 1 }, "no");`);
  assert.equal(quiet.status, 0, quiet.stderr);
  assert.equal(quiet.raw, "");
});

test("an unknown level is refused with the list of known ones", () => {
  const r = run({ level: "verbose", name: "x" }, ``);
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /log level must be one of trace\|debug\|info\|warn\|error\|fatal\|silent, got 'verbose'/);
});

/**
 * Logs one line to a file and 100 to /dev/null in a child, with `slowWriteMs` as given; answers what the
 * file held right after the first and the second call, the thread counts before and after, and the
 * file's final text.
 */
function directWrites(slowWriteMs: number): { now: string; now2: string; before: number; after: number; final: string } {
  const dir = mkdtempSync(join(tmpdir(), "log-test-"));
  try {
    const file = join(dir, "out");
    const script = `
      import { openSync, readFileSync, writeSync } from "node:fs";
      import { createJsonLogger } from ${JSON.stringify(LOG_MODULE)};
      const threads = () => Number(/^Threads:\\s+(\\d+)/m.exec(readFileSync("/proc/self/status", "utf8"))[1]);
      const before = threads();
      const opts = { level: "info", name: "x", slowWriteMs: ${slowWriteMs} };
      const log = createJsonLogger({ fd: openSync(${JSON.stringify(file)}, "w"), ...opts });
      log.info({ n: 1 }, "first");
      const now = readFileSync(${JSON.stringify(file)}, "utf8");
      log.info({ n: 2 }, "second");
      const now2 = readFileSync(${JSON.stringify(file)}, "utf8");
      const nul = createJsonLogger({ fd: openSync("/dev/null", "w"), ...opts });
      for (let i = 0; i < 100; i++) nul.info({ i }, "gone");
      setTimeout(() => writeSync(2, JSON.stringify({ now, now2, before, after: threads() })), 100);`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 20_000 });
    assert.equal(r.status, 0, r.stderr);
    return { ...(JSON.parse(r.stderr) as { now: string; now2: string; before: number; after: number }), final: readFileSync(file, "utf8") };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// The switch to the asynchronous path is timed, so the direct path is checked with a bound no write
// reaches on a loaded machine, and the switch itself with a bound every write exceeds.
test("to a regular file or /dev/null a line is written before the call returns, without libuv's thread pool", () => {
  const got = directWrites(60_000);
  assert.match(got.now, /"msg":"first"/, "written before log.info returned");
  assert.match(got.now2, /"msg":"second"/, "the second line too");
  assert.equal(got.after, got.before, "no thread pool started for the writes");
});

test("after a direct write slower than the bound, later lines go through the asynchronous path, none lost", () => {
  const got = directWrites(-1);
  assert.match(got.now, /"msg":"first"/, "the first line was still written directly");
  assert.doesNotMatch(got.now2, /"msg":"second"/, "the second line was queued, not written before the call returned");
  assert.deepEqual(got.final.split("\n").filter(Boolean).map((l) => (JSON.parse(l) as { msg: string }).msg), ["first", "second"]);
});

test("to a pipe lines go out asynchronously, all of them and in order, also when the process exits at once", () => {
  const script = `
    import { createJsonLogger } from ${JSON.stringify(LOG_MODULE)};
    const log = createJsonLogger({ fd: 1, level: "info", name: "x" });
    for (let i = 0; i < 5000; i++) log.info({ i }, "line");
    process.exit(0);`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 20_000, stdio: ["ignore", "pipe", "pipe"], maxBuffer: 64 * 1024 * 1024 });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l) as { i: number });
  assert.equal(lines.length, 5000);
  assert.ok(lines.every((l, i) => l.i === i));
});

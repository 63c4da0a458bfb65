import { test } from "node:test";
import assert from "node:assert/strict";
import { MAX_LINE, parseConsole } from "../../../src/sandboxd/sandboxes/console-log.js";

const T0 = Date.parse("2026-11-27T10:00:00.000Z");
const line = (o: object) => JSON.stringify(o);

test("envd's JSON lines keep their level, time, message and fields; others are info lines timed by their neighbours", () => {
  const text = [
    "tini: starting",
    line({ level: "warn", time: "2026-11-27T10:00:05.000Z", logger: "envd", msg: "slow", ms: 12.5 }),
    "envd exited with status 1; restarting",
    line({ level: "FATAL", time: "2026-11-27T10:00:06.000Z", msg: "gone" }),
    "",
  ].join("\r\n");
  const e = parseConsole(Buffer.from(text), T0, false);
  assert.deepEqual(e.map((x) => [x.level, x.message, x.ms - T0]), [
    ["info", "tini: starting", 0],
    ["warn", "slow", 5000],
    ["info", "envd exited with status 1; restarting", 5000],
    ["error", "gone", 6000],
  ]);
  assert.deepEqual({ ...e[1].fields }, { logger: "envd", ms: "12.5" });
  assert.equal(e[1].line, line({ level: "warn", time: "2026-11-27T10:00:05.000Z", logger: "envd", msg: "slow", ms: 12.5 }), "envd's own lines as written");
  assert.deepEqual(JSON.parse(e[2].line), { level: "info", time: "2026-11-27T10:00:05.000Z", msg: "envd exited with status 1; restarting" }, "others as envd's kind of line");
});

test("a tail that starts mid-line drops its first line; JSON that is not an entry is text; nothing throws", () => {
  const e = parseConsole(Buffer.from(`ial line\n[1,2]\n{"msg":5}\n{"level":{"x":1},"msg":"m","time":1e300}\n${"y".repeat(MAX_LINE + 10)}\n{bad json\n`), T0, true);
  assert.deepEqual(e.map((x) => x.message.slice(0, 12)), ["[1,2]", '{"msg":5}', "m", "y".repeat(12), "{bad json"]);
  assert.equal(e[2].level, "info");
  assert.equal(e[3].message.length, MAX_LINE);
  for (const x of e) assert.equal(typeof JSON.parse(x.line).level, "string");
  assert.deepEqual(parseConsole(Buffer.alloc(0), T0, false), []);
  assert.deepEqual(parseConsole(Buffer.from([0xff, 0xfe, 0x0a]), T0, false).map((x) => x.message), ["\ufffd\ufffd"]);
});

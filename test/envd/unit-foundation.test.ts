import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { parseConfig } from "../../src/envd/config.js";
import { expandAndResolve } from "../../src/envd/auth/paths.js";
import { basicUsername } from "../../src/envd/auth/identity.js";
import { fileSignature, validateSigning, type SigningInput } from "../../src/envd/auth/signature.js";
import { AccessToken, safeEqual } from "../../src/envd/auth/token.js";
import { rewriteHosts } from "../../src/envd/sandbox/hosts.js";
import { parseCpu, parseMeminfo } from "../../src/envd/sandbox/metrics.js";
import { needsStep, parseRfc3339Ns } from "../../src/envd/sandbox/clock.js";
import { EnvStore } from "../../src/envd/sandbox/env-store.js";
import { keepaliveIntervalMs } from "../../src/envd/stream/keepalive.js";
import { sniff } from "../../src/envd/http/front.js";
import { HttpError } from "../../src/envd/http/errors.js";
import type { User } from "../../src/envd/auth/users.js";

const user: User = { name: "user", uid: 1001, gid: 1001, home: "/home/user", shell: "/bin/bash", groups: [1001] };

test("config: defaults, flags over env over defaults, errors", () => {
  const r = parseConfig([], {}, "1.2.3");
  assert.ok("config" in r);
  assert.equal(r.config.port, 49983);
  assert.equal(r.config.defaultUser, "root");
  assert.equal(r.config.defaultWorkdir, undefined);
  const env = parseConfig([], { ENVD_PORT: "1234", ENVD_DEFAULT_USER: "user" }, "1.2.3");
  assert.ok("config" in env && env.config.port === 1234 && env.config.defaultUser === "user");
  const flag = parseConfig(["--port", "99"], { ENVD_PORT: "1234" }, "1.2.3");
  assert.ok("config" in flag && flag.config.port === 99);
  const v = parseConfig(["--version"], {}, "1.2.3");
  assert.deepEqual(v, { print: "1.2.3\n", exitCode: 0 });
  const bad = parseConfig(["--port", "x"], {}, "1.2.3");
  assert.ok("print" in bad && bad.exitCode === 2 && /--port/.test(bad.print));
  const unknown = parseConfig(["--nope"], {}, "1.2.3");
  assert.ok("print" in unknown && unknown.exitCode === 2);
  const clock = parseConfig(["--clock", "file:/tmp/c"], {}, "1");
  assert.ok("config" in clock && clock.config.clock.kind === "file");
  assert.ok("print" in parseConfig(["--clock", "sometimes"], {}, "1"));
  const level = parseConfig([], { ENVD_LOG_LEVEL: "verbose" }, "1");
  assert.ok("print" in level && level.exitCode === 2 && /--log-level must be one of .*got 'verbose'/.test(level.print));
  const quiet = parseConfig(["--log-level", "silent"], {}, "1");
  assert.ok("config" in quiet && quiet.config.logLevel === "silent");
  const help = parseConfig(["--help"], {}, "1");
  assert.ok("print" in help && help.exitCode === 0 && help.print.includes("ENVD_DEFAULT_WORKDIR"));
});

test("paths: the reference's resolution rules (§2.2)", () => {
  assert.equal(expandAndResolve("", user), "/home/user");
  assert.equal(expandAndResolve("", user, "/work"), "/work");
  assert.equal(expandAndResolve("a/../b", user, "/work"), "/home/user/b", "relative is under home, not the workdir");
  assert.equal(expandAndResolve("~", user), "/home/user");
  assert.equal(expandAndResolve("~/x/y", user), "/home/user/x/y");
  assert.equal(expandAndResolve("/a/../b/", user), "/a/../b/", "absolute paths are kept as sent");
  assert.throws(() => expandAndResolve("~root/x", user), (e: unknown) => e instanceof ConnectError && e.code === Code.InvalidArgument);
  assert.throws(() => expandAndResolve("/tmp/a\0b", user), (e: unknown) => e instanceof ConnectError && e.code === Code.InvalidArgument);
  assert.throws(() => expandAndResolve("/" + "a".repeat(5000), user), /longer than 4096/);
});

test("Basic auth username parsing", () => {
  assert.equal(basicUsername("Basic " + Buffer.from("root:").toString("base64")), "root");
  assert.equal(basicUsername("Basic " + Buffer.from("u:pw:x").toString("base64")), "u");
  assert.equal(basicUsername("Basic " + Buffer.from("nocolon").toString("base64")), undefined);
  assert.equal(basicUsername("Bearer abc"), undefined);
  assert.equal(basicUsername(undefined), undefined);
});

test("signatures: known-answer vectors from the reference and the SDK", () => {
  assert.equal(fileSignature("/home/user/a.txt", "read", "", "tok"), "v1_Zkbb3914oLJLvMBzCAHQhm2ydBLxbSx2eQUR/kLdvIY");
  assert.equal(fileSignature("/home/user/a.txt", "write", "user", "tok", 1767225600), "v1_/9w/WwXs3BsvxmHta7BtqbbSNmG3EHLrppYpIFot+To");
  assert.equal(fileSignature("hello.txt", "read", "user", "0tQG31xiMp0IOQfaz9dcwi72L1CPo8e0"), "v1_gUtH/s9YCJWgCizjfUxuWfhFE4QSydOWEIIvfLwDr6E");
});

test("signatures: validation order and messages (§3.4)", () => {
  const token = new AccessToken();
  const base: SigningInput = { headerToken: undefined, path: "a.txt", username: "", signature: undefined, expiration: undefined, operation: "read", nowSeconds: 1000 };
  validateSigning(token, base); // no token: open
  token.set("tok");
  const msg = (input: Partial<SigningInput>) => {
    try {
      validateSigning(token, { ...base, ...input });
      return "ok";
    } catch (e) {
      return `${(e as HttpError).status} ${(e as HttpError).message}`;
    }
  };
  assert.equal(msg({ headerToken: "tok" }), "ok");
  assert.equal(msg({ headerToken: "bad" }), "401 access token present in header but does not match");
  assert.equal(msg({}), "401 missing signature query parameter");
  assert.equal(msg({ signature: "v1_x" }), "401 invalid signature");
  assert.equal(msg({ signature: fileSignature("a.txt", "read", "", "tok") }), "ok");
  assert.equal(msg({ signature: fileSignature("a.txt", "write", "", "tok") }), "401 invalid signature");
  assert.equal(msg({ signature: fileSignature("a.txt", "read", "", "tok", 1000), expiration: "1000" }), "ok", "expiry equal to now is valid");
  assert.equal(msg({ signature: fileSignature("a.txt", "read", "", "tok", 999), expiration: "999" }), "401 signature is already expired");
  assert.match(msg({ signature: "x", expiration: "soon" }), /^400 Invalid format for parameter signature_expiration/);
});

test("constant-time equality and the token holder", () => {
  assert.equal(safeEqual("a", "a"), true);
  assert.equal(safeEqual("a", "ab"), false);
  const t = new AccessToken();
  assert.equal(t.equals("x"), false);
  t.set("x");
  assert.equal(t.isSet, true);
  assert.equal(t.equals("x"), true);
  t.set("");
  assert.equal(t.isSet, false);
});

test("hosts rewrite keeps comments and entries, replaces the events name", () => {
  assert.equal(rewriteHosts("\n\n127.0.0.1 localhost\n\n", "127.0.0.3"), "\n\n127.0.0.1 localhost\n127.0.0.3        events.e2b.local\n");
  assert.equal(rewriteHosts("# c\n1.2.3.4 events.e2b.local other\n", "::1"), "# c\n::1        events.e2b.local\n");
  assert.equal(rewriteHosts("", "10.0.0.1"), "10.0.0.1        events.e2b.local\n");
});

test("metrics parsers", () => {
  const cpu = parseCpu("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n");
  assert.deepEqual(cpu, { busy: 150, total: 1000 });
  const mem = parseMeminfo("MemTotal:       1000 kB\nMemFree: 10 kB\nHugePages_Total: 0\n");
  assert.equal(mem.get("MemTotal"), 1024000);
  assert.equal(mem.get("HugePages_Total"), 0);
  assert.throws(() => parseCpu("nothing"));
});

test("clock: step thresholds and RFC 3339 with nanoseconds", () => {
  const host = 1_000_000_000_000_000_000n;
  assert.equal(needsStep(host + 10_000_000_000n, host), true, "10 s ahead");
  assert.equal(needsStep(host + 5_000_000_000n, host), false, "5 s ahead");
  assert.equal(needsStep(host, host), false);
  assert.equal(needsStep(host - 50_000_000n, host), false, "50 ms behind");
  assert.equal(needsStep(host - 60_000_000_000n, host), true, "1 min behind");
  assert.equal(parseRfc3339Ns("2030-01-01T00:00:00.000000001Z"), BigInt(Date.UTC(2030, 0, 1)) * 1_000_000n + 1n);
  assert.equal(parseRfc3339Ns("2030-01-01T02:00:00+02:00"), BigInt(Date.UTC(2030, 0, 1)) * 1_000_000n);
  assert.equal(parseRfc3339Ns("2030-13-01T00:00:00Z"), undefined);
  assert.equal(parseRfc3339Ns("yesterday"), undefined);
});

test("env store: internal names are immune to replace", () => {
  const e = new EnvStore();
  e.setInternal("E2B_SANDBOX", "true");
  e.replaceUser({ A: "1", E2B_SANDBOX: "x" });
  assert.deepEqual(e.all(), { A: "1", E2B_SANDBOX: "true" });
  e.replaceUser({});
  assert.deepEqual(e.all(), { E2B_SANDBOX: "true" });
});

test("keepalive interval: invalid, zero and negative fall back to 90 s", () => {
  assert.equal(keepaliveIntervalMs("50"), 50_000);
  for (const v of [null, undefined, "", "0", "-5", "abc", "1.5"]) assert.equal(keepaliveIntervalMs(v), 90_000, String(v));
});

test("protocol sniffing on the first bytes", () => {
  assert.equal(sniff(Buffer.from("GET / HTTP/1.1\r\n")), "http1");
  assert.equal(sniff(Buffer.from("PRI * HT")), "undecided");
  assert.equal(sniff(Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")), "h2");
  assert.equal(sniff(Buffer.from("POST /x")), "http1");
});

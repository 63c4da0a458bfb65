// One unauthenticated request must not end the daemon, and a daemon that ends anyway must not
// come back open: request targets and Host headers the URL parser rejects, over HTTP/1.1 and
// h2c, answer 400 while the daemon keeps serving; a daemon killed after /init set a token, or
// started with a host token hash, serves nothing but /health and /init until /init succeeds.
import { test } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { startDaemon, type Daemon } from "./helpers/daemon.js";
import { clients } from "./helpers/clients.js";
import { assertHealthy, corpusJson, rawExchange } from "./helpers/fuzz.js";

const NOT_INITIALIZED = { code: 401, message: "envd not initialized" };
const sha512 = (s: string): string => createHash("sha512").update(s).digest("hex");

/** The audit's malformed targets, each as a whole HTTP/1.1 request. */
const H1_REQUESTS: [string, string][] = [
  ["GET //a:99999/", "GET //a:99999/ HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["GET //[", "GET //[ HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["GET http://a:99999/", "GET http://a:99999/ HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["GET //%zz/", "GET //%zz/ HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["POST //a:99999/init", "POST //a:99999/init HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"],
  // connect-node builds a URL from Host and target for every call it serves (gRPC here).
  ["Stat with Host a:99999", "POST /filesystem.Filesystem/Stat HTTP/1.1\r\nHost: a:99999\r\nContent-Type: application/grpc\r\nContent-Length: 0\r\n\r\n"],
  ["Start with Host a:99999 (admitted path)", "POST /process.Process/Start HTTP/1.1\r\nHost: a:99999\r\nContent-Type: application/grpc\r\nContent-Length: 0\r\n\r\n"],
  ["HTTP/1.0 gRPC call without Host", "POST /filesystem.Filesystem/Stat HTTP/1.0\r\nContent-Type: application/grpc\r\nContent-Length: 0\r\n\r\n"],
];

/** HTTP/2 :path values of the corpus (each sent raw, as the audit's client did). */
const H2_PATHS = corpusJson<{ h2Paths: string[] }>("http-requests.json").h2Paths;

function alive(d: Daemon, what: string): void {
  assert.equal(d.proc.exitCode, null, `${what}: the daemon exited\n${d.logs().slice(-1500)}`);
  assert.equal(d.proc.signalCode, null, `${what}: the daemon was killed by ${d.proc.signalCode}`);
}

/** One h2c request with the given pseudo-headers; resolves with the status, or the stream's error code. */
function h2Request(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders): Promise<number | string> {
  return new Promise((resolve) => {
    const req = session.request(headers, { endStream: true });
    req.on("response", (h) => resolve(Number(h[":status"])));
    req.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
    req.on("close", () => resolve(`closed ${req.rstCode}`));
    req.resume();
  });
}

test("malformed request targets and Host headers over HTTP/1.1 answer 400; the daemon keeps serving", async () => {
  const d = await startDaemon();
  try {
    for (const [what, text] of H1_REQUESTS) {
      const a = await rawExchange(d.port, text, 3000);
      assert.equal(a.status, 400, `${what}: ${a.status} ${a.body.toString().slice(0, 120)}`);
      alive(d, what);
      assert.equal((await fetch(`${d.url}/health`)).status, 204, `${what}: /health after`);
    }
    await assertHealthy(d, "after malformed HTTP/1.1 targets");
  } finally {
    await d.stop();
  }
});

test("malformed :path and :authority over h2c answer 400 on that stream; the session and the daemon go on", async () => {
  const d = await startDaemon();
  const session = http2.connect(d.url);
  session.on("error", () => undefined);
  try {
    for (const path of H2_PATHS) {
      const status = await h2Request(session, { ":method": "GET", ":path": path });
      // A :path that is not origin-form never reaches envd: nghttp2 resets the stream itself.
      if (path.startsWith("/")) assert.equal(status, 400, `:path ${path}`);
      else assert.ok(status === 400 || typeof status === "string", `:path ${path}: ${status}`);
      alive(d, `:path ${path}`);
    }
    const grpc = { ":method": "POST", ":path": "/filesystem.Filesystem/Stat", "content-type": "application/grpc" };
    assert.equal(await h2Request(session, { ...grpc, ":authority": "a:99999" }), 400, "Stat with :authority a:99999");
    assert.equal(await h2Request(session, { ...grpc, ":path": "/process.Process/Start", ":authority": "a:99999" }), 400, "Start with :authority a:99999");
    alive(d, "bad :authority");
    assert.equal(await h2Request(session, { ":method": "GET", ":path": "/health" }), 204, "the same session still serves");
    await assertHealthy(d, "after malformed h2c targets");
  } finally {
    session.destroy();
    await d.stop();
  }
});

test("killed after /init set a token, the restarted daemon is closed until /init presents it again", async () => {
  const runDir = mkdtempSync(join(tmpdir(), "envd-restart-"));
  const marker = join(runDir, "ran");
  const args = ["--run-dir", runDir, "--default-user", "root"];
  let d = await startDaemon({ args });
  try {
    const init = (body: object, url = d.url) => fetch(`${url}/init`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    assert.equal((await init({ accessToken: "tok-restart" })).status, 204);
    d.proc.kill("SIGKILL");
    await d.stop();
    d = await startDaemon({ args });
    const start = clients(d.url).proc.json.start({ process: { cmd: "/bin/sh", args: ["-c", `id > ${marker}`] } });
    await assert.rejects(
      (async () => {
        for await (const _ of start) break;
      })(),
      (err) => ConnectError.from(err).code === Code.Unauthenticated,
      "an unauthenticated Start after the restart",
    );
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(existsSync(marker), false, "nothing ran");
    const envs = await fetch(`${d.url}/envs`);
    assert.equal(envs.status, 401);
    assert.deepEqual(await envs.json(), NOT_INITIALIZED);
    assert.equal((await fetch(`${d.url}/envs`, { headers: { "x-access-token": "tok-restart" } })).status, 401, "not even with the token before /init");
    assert.equal((await fetch(`${d.url}/files?path=/etc/hostname`)).status, 401, "/files too");
    assert.equal((await fetch(`${d.url}/health`)).status, 204);
    // /init: another token, or none, is refused; the previous one re-opens it.
    assert.equal((await init({ accessToken: "tok-attacker" })).status, 401);
    assert.equal((await init({})).status, 401);
    assert.equal((await init({ accessToken: "tok-restart" })).status, 204);
    assert.equal((await fetch(`${d.url}/envs`)).status, 401, "the token gate again");
    assert.equal((await fetch(`${d.url}/envs`, { headers: { "x-access-token": "tok-restart" } })).status, 200);
    // What is kept: the token's hash, root-only; never the token.
    const file = join(runDir, "envd", "access-token.sha512");
    assert.equal(statSync(join(runDir, "envd")).mode & 0o777, 0o700);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(readFileSync(file, "utf8").trim(), sha512("tok-restart"));
    assert.doesNotMatch(d.logs(), /tok-restart/);
  } finally {
    await d.stop();
    rmSync(runDir, { recursive: true, force: true });
  }
});

test("a host token hash, or an unreadable record of the last token, keeps a fresh daemon closed until /init", async () => {
  const d = await startDaemon({ args: ["--access-token-hash", sha512("host-tok")] });
  try {
    const r = await fetch(`${d.url}/envs`);
    assert.deepEqual([r.status, await r.json()], [401, NOT_INITIALIZED]);
    assert.equal((await fetch(`${d.url}/health`)).status, 204);
    const init = await fetch(`${d.url}/init`, { method: "POST", body: JSON.stringify({ accessToken: "host-tok" }) });
    assert.equal(init.status, 204);
    assert.equal((await fetch(`${d.url}/envs`, { headers: { "x-access-token": "host-tok" } })).status, 200);
  } finally {
    await d.stop();
  }
  // A record envd cannot trust (not private) reads as "a token may have been set": fail closed.
  const runDir = mkdtempSync(join(tmpdir(), "envd-unreadable-"));
  mkdirSync(join(runDir, "envd"), { mode: 0o700 });
  writeFileSync(join(runDir, "envd", "access-token.sha512"), sha512("x") + "\n", { mode: 0o644 });
  const d2 = await startDaemon({ args: ["--run-dir", runDir] });
  try {
    assert.equal((await fetch(`${d2.url}/envs`)).status, 401);
    const init = await fetch(`${d2.url}/init`, { method: "POST", body: JSON.stringify({ accessToken: "anyone" }) });
    assert.equal(init.status, 401, "no token can claim a daemon whose last token is unknown");
    assert.match(d2.logs(), /cannot tell whether a token was set/);
  } finally {
    await d2.stop();
    rmSync(runDir, { recursive: true, force: true });
  }
});

test("a token whose hash cannot be recorded still closes the gate, and /init says it was not recorded", async () => {
  const runDir = mkdtempSync(join(tmpdir(), "envd-unwritable-"));
  const d = await startDaemon({ args: ["--run-dir", runDir] });
  try {
    // The state directory is replaced by a file after start: every later write fails.
    rmSync(join(runDir, "envd"), { recursive: true, force: true });
    writeFileSync(join(runDir, "envd"), "");
    const init = await fetch(`${d.url}/init`, { method: "POST", body: JSON.stringify({ accessToken: "tok-unrecorded" }) });
    assert.equal(init.status, 500);
    assert.equal(await init.text(), "failed to record the access token state for restarts of envd");
    assert.equal((await fetch(`${d.url}/envs`)).status, 401, "closed by the token in memory");
    assert.equal((await fetch(`${d.url}/envs`, { headers: { "x-access-token": "tok-unrecorded" } })).status, 200);
    assert.doesNotMatch(d.logs(), /tok-unrecorded/);
  } finally {
    await d.stop();
    rmSync(runDir, { recursive: true, force: true });
  }
});

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { api } from "../helpers/api-client.js";
import { call, startSandboxd, waitWarmPool, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/sdk-run.js";

const RUNC = spawnSync("runc", ["--version"]).status === 0;

/** A server in the sandbox that answers with the Host header it got. */
const HOST_ECHO_PY = [
  "import http.server as h",
  "class H(h.BaseHTTPRequestHandler):",
  "    def do_GET(s):",
  "        b = s.headers.get('host', '').encode()",
  "        s.send_response(200); s.end_headers(); s.wfile.write(b)",
  "h.HTTPServer(('0.0.0.0', 8001), H).serve_forever()",
  "",
].join("\n");

describe("the published e2b SDK against a real sandboxd", { skip: RUNC ? false : "runc is not installed" }, () => {
  let s: Sandboxd;
  let ca: Buffer;

  // sandboxd's default: creates claim started sandboxes from the warm pool
  before(async () => {
    s = await startSandboxd({ args: ["--warm-pool", "2"] });
    ca = readFileSync(s.caFile);
    await waitWarmPool(s, 2);
  });
  after(async () => {
    await s?.stop();
  });

  test("create → run → files → getHost to an http.server → list → setTimeout → pause (502) → connect → kill", async () => {
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const out = {};
      const sbx = await Sandbox.create({ timeoutMs: 120_000, metadata: { suite: "sdk" }, envs: { GREETING: "hi" } });
      out.id = sbx.sandboxId;
      out.echo = (await sbx.commands.run("echo hi")).stdout;
      out.env = (await sbx.commands.run("echo $GREETING $E2B_SANDBOX")).stdout;
      out.identity = (await sbx.commands.run("echo $E2B_SANDBOX_ID $E2B_TEMPLATE_ID; cat /run/e2b/.E2B_SANDBOX_ID")).stdout;
      await sbx.files.write("/home/user/page.txt", "served by python");
      out.read = await sbx.files.read("/home/user/page.txt");
      await sbx.commands.run("python3 -m http.server 8000 --bind 0.0.0.0", { background: true, cwd: "/home/user" });
      const host = sbx.getHost(8000);
      out.host = host;
      for (let i = 0; i < 100 && out.http === undefined; i++) {
        const res = await fetch("https://" + host + "/page.txt").catch(() => undefined);
        if (res?.status === 200) out.http = await res.text();
        else await new Promise((r) => setTimeout(r, 100));
      }
      const listed = await Sandbox.list({ query: { metadata: { suite: "sdk" } } }).nextItems();
      out.listed = listed.map((x) => [x.sandboxId, x.state, x.metadata.suite]);
      await sbx.setTimeout(60_000);
      const info = await sbx.getInfo();
      out.endIn = new Date(info.endAt).getTime() - Date.now();
      out.paused = await sbx.pause();
      out.pausedAgain = await Sandbox.pause(sbx.sandboxId);
      out.runningWhilePaused = await sbx.isRunning();
      out.proxiedWhilePaused = (await fetch("https://" + host + "/page.txt")).status;
      out.stateWhilePaused = (await sbx.getInfo()).state;
      const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 });
      out.runningAfterConnect = await again.isRunning();
      out.readAfterConnect = (await again.commands.run("cat /home/user/page.txt")).stdout;
      out.httpAfterConnect = await (await fetch("https://" + host + "/page.txt")).text();
      out.killed = await again.kill();
      out.runningAfterKill = await again.isRunning();
      out.killAgain = await Sandbox.kill(sbx.sandboxId);
      console.log(JSON.stringify(out));
    `);
    assert.match(got.id, /^i[a-z0-9]{20}$/);
    assert.equal(got.echo, "hi\n");
    assert.equal(got.env, "hi true\n");
    // The IDs every process sees, as E2B's envd exports them from MMDS (sandboxd sets them for envd).
    const [idLine, fileLine] = String(got.identity).trim().split("\n");
    assert.match(idLine, new RegExp(`^${String(got.id)} [a-z0-9]{20}$`));
    assert.equal(fileLine, got.id);
    assert.equal(got.read, "served by python");
    assert.equal(got.host, `8000-${got.id}.${s.domain}`);
    assert.equal(got.http, "served by python");
    assert.deepEqual(got.listed, [[got.id, "running", "sdk"]]);
    assert.ok(got.endIn > 55_000 && got.endIn <= 60_000, `endAt ${got.endIn} ms away after setTimeout(60 s)`);
    assert.equal(got.paused, true);
    assert.equal(got.pausedAgain, false);
    assert.equal(got.runningWhilePaused, false);
    assert.equal(got.proxiedWhilePaused, 502);
    assert.equal(got.stateWhilePaused, "paused");
    assert.equal(got.runningAfterConnect, true);
    assert.equal(got.readAfterConnect, "served by python");
    assert.equal(got.httpAfterConnect, "served by python");
    assert.equal(got.killed, true);
    assert.equal(got.runningAfterKill, false);
    assert.equal(got.killAgain, false);
    assert.equal((await api(s, ca, "GET", `/sandboxes/${got.id}`)).status, 404);
  });

  test("allowPublicTraffic false: other ports need the traffic token, maskRequestHost rewrites Host, envd works with the access token", async () => {
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create({ timeoutMs: 60_000, network: { allowPublicTraffic: false, maskRequestHost: "masked-\${PORT}.internal" } });
      const out = { token: sbx.trafficAccessToken };
      await sbx.files.write("/home/user/host.py", ${JSON.stringify(HOST_ECHO_PY)});
      await sbx.commands.run("python3 /home/user/host.py", { background: true });
      const url = "https://" + sbx.getHost(8001) + "/";
      for (let i = 0; i < 100 && out.withToken === undefined; i++) {
        const res = await fetch(url, { headers: { "e2b-traffic-access-token": sbx.trafficAccessToken } }).catch(() => undefined);
        if (res?.status === 200) out.withToken = await res.text();
        else await new Promise((r) => setTimeout(r, 100));
      }
      out.without = (await fetch(url)).status;
      out.wrong = (await fetch(url, { headers: { "e2b-traffic-access-token": "x".repeat(64) } })).status;
      out.info = await sbx.getInfo().then((i) => i.sandboxId);
      await sbx.kill();
      console.log(JSON.stringify(out));
    `);
    assert.match(got.token, /^[0-9a-f]{64}$/);
    assert.equal(got.withToken, "masked-8001.internal");
    assert.equal(got.without, 403);
    assert.equal(got.wrong, 403);
    assert.match(got.info, /^i[a-z0-9]{20}$/);
  });

  test("an expired sandbox is gone after its end, not before (the evictor looks every 250 ms; removal is runc's time)", async () => {
    const made = await api(s, ca, "POST", "/sandboxes", { body: { templateID: "base", timeout: 2 } });
    assert.equal(made.status, 201, made.body);
    const id = made.json.sandboxID;
    const endAt = Date.parse((await api(s, ca, "GET", `/sandboxes/${id}`)).json.endAt);
    let goneAt = 0;
    // a generous bound only so that a sandbox never removed fails the test; how soon is the bench's
    while (Date.now() < endAt + 60_000) {
      if ((await api(s, ca, "GET", `/sandboxes/${id}`)).status === 404) {
        goneAt = Date.now();
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(goneAt > 0, "the sandbox was still listed 60 s past its end");
    assert.ok(goneAt >= endAt, "not killed before its end");
    assert.deepEqual((await api(s, ca, "GET", "/v2/sandboxes")).json, []);
  });

  test("an autoPause sandbox is paused, not killed, at its end", async () => {
    const made = await api(s, ca, "POST", "/sandboxes", { body: { templateID: "base", timeout: 1, autoPause: true } });
    assert.equal(made.status, 201, made.body);
    const id = made.json.sandboxID;
    let state = "";
    for (let i = 0; i < 600 && state !== "paused"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      state = (await api(s, ca, "GET", `/sandboxes/${id}`)).json.state;
    }
    assert.equal(state, "paused");
    assert.equal((await api(s, ca, "DELETE", `/sandboxes/${id}`)).status, 204);
  });

  test("lifecycle autoResume: a paused sandbox is resumed by its traffic (envd's and a server's), state and memory kept", async () => {
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const out = {};
      const sbx = await Sandbox.create({ timeoutMs: 120_000, lifecycle: { onTimeout: "pause", autoResume: true } });
      out.id = sbx.sandboxId;
      out.lifecycle = (await sbx.getInfo()).lifecycle;
      await sbx.commands.run("python3 -m http.server 8000 --bind 0.0.0.0", { background: true, cwd: "/tmp" });
      await sbx.commands.run("echo kept > /tmp/page.txt");
      const host = sbx.getHost(8000);
      for (let i = 0; i < 100 && out.before === undefined; i++) {
        const res = await fetch("https://" + host + "/page.txt").catch(() => undefined);
        if (res?.status === 200) out.before = await res.text();
        else await new Promise((r) => setTimeout(r, 100));
      }
      await sbx.pause();
      out.stateWhilePaused = (await sbx.getInfo()).state;
      // a request to a server in the sandbox resumes it, and the server is still there
      out.http = await (await fetch("https://" + host + "/page.txt")).text();
      out.stateAfterHttp = (await sbx.getInfo()).state;
      await sbx.pause();
      // and so does the SDK talking to envd
      out.cmd = (await sbx.commands.run("cat /tmp/page.txt")).stdout;
      out.stateAfterCmd = (await sbx.getInfo()).state;
      await sbx.kill();
      console.log(JSON.stringify(out));
    `);
    assert.deepEqual(got.lifecycle, { autoResume: true, onTimeout: "pause" });
    assert.equal(got.before, "kept\n");
    assert.equal(got.stateWhilePaused, "paused");
    assert.equal(got.http, "kept\n");
    assert.equal(got.stateAfterHttp, "running");
    assert.equal(got.cmd, "kept\n");
    assert.equal(got.stateAfterCmd, "running");
    assert.match(s.logs(), new RegExp(`"sandboxID":"${got.id}"[^\n]*"msg":"sandbox resumed by traffic"`));
    // without autoResume a paused sandbox stays paused: 502
    const plain = await api(s, ca, "POST", "/sandboxes", { body: { templateID: "base", timeout: 60, autoPause: true } });
    assert.equal(plain.status, 201, plain.body);
    assert.equal((await api(s, ca, "POST", `/sandboxes/${plain.json.sandboxID}/pause`)).status, 204);
    const proxied = await call(s.port, ca, `49983-${plain.json.sandboxID}.e2b.localhost`, "/health");
    assert.equal(proxied.status, 502);
    assert.equal((await api(s, ca, "GET", `/sandboxes/${plain.json.sandboxID}`)).json.state, "paused");
    assert.equal((await api(s, ca, "DELETE", `/sandboxes/${plain.json.sandboxID}`)).status, 204);
    // a request the sandbox would refuse anyway does not resume it: no traffic token, or envd's /init
    const priv = await api(s, ca, "POST", "/sandboxes", { body: { templateID: "base", timeout: 60, autoPause: true, autoResume: { enabled: true }, secure: true, network: { allowPublicTraffic: false } } });
    assert.equal(priv.status, 201, priv.body);
    const privID = priv.json.sandboxID as string;
    assert.equal((await api(s, ca, "POST", `/sandboxes/${privID}/pause`)).status, 204);
    const noToken = await call(s.port, ca, `8000-${privID}.e2b.localhost`, "/");
    assert.equal(noToken.status, 403, noToken.body);
    const internal = await call(s.port, ca, `49983-${privID}.e2b.localhost`, "/init", { method: "POST", body: {} });
    assert.notEqual(internal.status, 200);
    assert.equal((await api(s, ca, "GET", `/sandboxes/${privID}`)).json.state, "paused", "refused requests leave it paused");
    const withToken = await call(s.port, ca, `8000-${privID}.e2b.localhost`, "/", { headers: { "e2b-traffic-access-token": priv.json.trafficAccessToken } });
    assert.equal(withToken.status, 502, "resumed, and nothing listens on 8000");
    assert.match(withToken.body, /port is not open/);
    assert.equal((await api(s, ca, "GET", `/sandboxes/${privID}`)).json.state, "running");
    assert.equal((await api(s, ca, "DELETE", `/sandboxes/${privID}`)).status, 204);
    // autoResume needs autoPause
    const bad = await api(s, ca, "POST", "/sandboxes", { body: { templateID: "base", autoResume: { enabled: true } } });
    assert.equal(bad.status, 400);
    assert.match(bad.json.message, /autoResume.enabled requires autoPause/);
  });

  test("after SIGTERM and a new start on the same data dir, a running sandbox is still listed and served", async () => {
    const made = await api(s, ca, "POST", "/sandboxes", { body: { templateID: "base", timeout: 300, metadata: { keep: "yes" } } });
    assert.equal(made.status, 201, made.body);
    const id = made.json.sandboxID;
    const before = await api(s, ca, "GET", `/sandboxes/${id}`);
    assert.equal(await s.terminate("SIGTERM"), 0);
    const first = s;
    s = await startSandboxd({ dataDir: first.dataDir });
    try {
      assert.equal(s.apiKey, first.apiKey, "the same key works after a restart");
      const listed = await api(s, ca, "GET", "/v2/sandboxes");
      assert.deepEqual(listed.json.map((x: { sandboxID: string; state: string }) => [x.sandboxID, x.state]), [[id, "running"]]);
      assert.equal((await api(s, ca, "GET", `/sandboxes/${id}`)).json.endAt, before.json.endAt);
      const got = await runSdk(s, `
        import { Sandbox } from "e2b";
        const sbx = await Sandbox.connect(${JSON.stringify(id)});
        console.log(JSON.stringify({ out: (await sbx.commands.run("echo still here")).stdout, running: await sbx.isRunning() }));
      `);
      assert.deepEqual(got, { out: "still here\n", running: true });
    } finally {
      await s.stop();
      s = first;
    }
  });
});

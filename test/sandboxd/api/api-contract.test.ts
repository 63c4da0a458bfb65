import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { api } from "../helpers/api-client.js";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/sdk-run.js";

/** Runs an SDK snippet that must throw; reports the error's class, status and message. */
const failing = (body: string) => `
  import { Sandbox, SandboxNotFoundError, Volume } from "e2b";
  try {
    ${body}
    console.log(JSON.stringify({ threw: false }));
  } catch (e) {
    console.log(JSON.stringify({ threw: true, name: e.constructor.name, notFound: e instanceof SandboxNotFoundError, message: String(e.message) }));
  }`;

// What the server cannot honour is refused, never dropped: a client that asked for header
// injection, workload identity, MCP servers or a cold boot must hear that it did not get them.
describe("the control API refuses what it cannot honour and says what is not served", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  const made: string[] = [];

  before(async () => {
    s = await startSandboxd();
    ca = readFileSync(s.caFile);
  });
  after(async () => {
    for (const id of made) await api(s, ca, "DELETE", `/sandboxes/${id}`).catch(() => undefined);
    await s?.stop();
  });

  /** How many sandboxes the team has (a refused create must make none). */
  const count = async () => ((await api(s, ca, "GET", "/v2/sandboxes?state=running,paused")).json as unknown[]).length;

  test("Sandbox.create with mcp, iam or network.rules transforms gets a 400 naming the field, and no sandbox", async () => {
    const cases: [string, RegExp][] = [
      [`await Sandbox.create("base", { mcp: { exa: { apiKey: "k" } } })`, /400: mcp: MCP servers in the sandbox are not supported by this server/],
      [`await Sandbox.create("base", { iam: { tokens: { gh: { audience: "https://github.com", tokenType: "jwt" } } } })`, /400: iam: workload identity tokens are not supported by this server/],
      [`await Sandbox.create("base", { network: { allowOut: ["api.example.com"], rules: { "api.example.com": [{ transform: { headers: { Authorization: "Bearer s3cret" } } }] } } })`,
        /400: network\.rules: request transforms \(header injection for "api\.example\.com"\) are not supported by this server/],
      [`await Sandbox.create("base", { network: { httpsPorts: [0] } })`, /400: validation error: field "network\.httpsPorts": 0 is not a port number/],
      [`await Sandbox.create("base", { network: { httpsPorts: [443, 65536] } })`, /400: validation error: field "network\.httpsPorts": 65536 is not a port number/],
      [`await Sandbox.create("base", { network: { httpsPorts: [49983] } })`, /400: validation error: field "network\.httpsPorts": the envd port 49983 cannot be listed/],
    ];
    const before = await count();
    for (const [code, want] of cases) {
      const got = await runSdk(s, failing(code));
      assert.equal(got.threw, true, code);
      assert.match(got.message, want, code);
      assert.equal(got.name, "SandboxError", code);
    }
    assert.equal(await count(), before, "no refused create left a sandbox");
  });

  test("raw HTTP: unknown fields, v2 secure=false, rules on a network update, autoResume extras are refused", async () => {
    const cases: [string, string, unknown, RegExp][] = [
      ["POST", "/v2/sandboxes", { templateID: "base", gpu: 1 }, /^field "gpu" is not supported by this server$/],
      ["POST", "/sandboxes", { templateID: "base", network: { bogus: true } }, /^network: field "bogus" is not supported by this server$/],
      ["POST", "/v2/sandboxes", { templateID: "base", autoPause: true, autoResume: { enabled: true, afterMs: 5 } }, /^autoResume: field "afterMs" is not supported/],
      ["POST", "/v2/sandboxes", { templateID: "base", secure: false }, /secure=false is not accepted/],
      ["POST", "/v2/sandboxes", { templateID: "base", iam: { tokens: {}, roles: ["x"] } }, /^iam: field "roles" is not supported/],
      ["POST", "/v2/sandboxes", { templateID: "base", network: { httpsPorts: "443" } }, /must be an array of port numbers/],
      ["POST", "/v2/sandboxes", { templateID: "base", network: { httpsPorts: [8443.5] } }, /8443\.5 is not a port number/],
      ["POST", "/v2/sandboxes", { templateID: "base", network: { rules: { "x.com": [{ transform: {}, inject: 1 }] } } }, /field "inject" is not supported/],
    ];
    const before = await count();
    for (const [method, path, body, want] of cases) {
      const r = await api(s, ca, method, path, { body });
      assert.equal(r.status, 400, `${JSON.stringify(body)} → ${r.body}`);
      assert.equal(r.json.code, 400);
      assert.match(r.json.message, want, JSON.stringify(body));
    }
    assert.equal(await count(), before);

    // What the server does honour still goes through: httpsPorts are stored as sent, empty
    // mcp / iam / rules ask for nothing.
    const ok = await api(s, ca, "POST", "/v2/sandboxes", { body: { templateID: "base", timeout: 120, mcp: {}, iam: { tokens: {} }, network: { httpsPorts: [443, 8443], rules: { "x.com": [{}] } } } });
    assert.equal(ok.status, 201, ok.body);
    const id = String(ok.json.sandboxID);
    made.push(id);
    const db = new DatabaseSync(join(s.dataDir, "sandboxd.db"), { readOnly: true });
    try {
      const row = db.prepare("SELECT network FROM sandboxes WHERE id = ?").get(id) as { network: string };
      assert.deepEqual(JSON.parse(row.network).httpsPorts, [443, 8443]);
    } finally {
      db.close();
    }

    const put = await api(s, ca, "PUT", `/sandboxes/${id}/network`, { body: { rules: { "api.example.com": [{ transform: { headers: { "x-token": "t" } } }] } } });
    assert.equal(put.status, 400, put.body);
    assert.match(put.json.message, /^rules: request transforms .* are not supported by this server$/);
    const putUnknown = await api(s, ca, "PUT", `/sandboxes/${id}/network`, { body: { allowOut: [], httpsPorts: [443] } });
    assert.equal(putUnknown.status, 400, putUnknown.body);
    assert.match(putUnknown.json.message, /^field "httpsPorts" is not supported by this server$/);
    for (const [path, body] of [[`/sandboxes/${id}/timeout`, { timeout: 60, extendOnly: true }], [`/sandboxes/${id}/refreshes`, { duration: 60, every: 5 }], [`/sandboxes/${id}/pause`, { memory: true, compress: true }]] as const) {
      const r = await api(s, ca, "POST", path, { body });
      assert.equal(r.status, 400, `${path} → ${r.body}`);
      assert.match(r.json.message, /^field "(extendOnly|every|compress)" is not supported by this server$/);
    }
  });

  test("connect with onResume 'reboot' cold-boots a frozen sandbox from its disk: files kept, processes gone; unknown fields stay refused", async () => {
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create("base", { timeoutMs: 120_000 });
      await sbx.commands.run("echo kept > /home/user/mark");
      await sbx.commands.run("sleep 1000", { background: true });
      await sbx.pause();
      const again = await Sandbox.connect(sbx.sandboxId, { onResume: "reboot" });
      const state = (await Sandbox.getInfo(sbx.sandboxId)).state;
      const mark = (await again.commands.run("cat /home/user/mark")).stdout;
      const sleeping = (await again.commands.run("pgrep -x sleep || echo none")).stdout;
      console.log(JSON.stringify({ id: sbx.sandboxId, state, mark, sleeping }));
    `);
    made.push(got.id);
    assert.equal(got.state, "running");
    assert.equal(got.mark, "kept\n", "the disk is kept");
    assert.equal(got.sleeping, "none\n", "the processes of before the pause are gone: a cold boot");

    for (const [path, body, want] of [
      [`/sandboxes/${got.id}/resume`, { timeout: 30, region: "eu" }, /^field "region" is not supported by this server$/],
      [`/v2/sandboxes/${got.id}/connect`, { keepAlive: true }, /^field "keepAlive" is not supported by this server$/],
      [`/sandboxes/${got.id}/pause`, { memory: "no" }, /"memory" must be a boolean/],
    ] as const) {
      const r = await api(s, ca, "POST", path, { body });
      assert.equal(r.status, 400, `${path} ${JSON.stringify(body)} → ${r.body}`);
      assert.match(r.json.message, want);
    }
  });

  test("operations the server lacks answer 501 'not supported', which the SDK does not report as a missing sandbox", async () => {
    const got = await runSdk(s, `
      import { Sandbox, SandboxNotFoundError, Volume } from "e2b";
      const sbx = await Sandbox.create("base", { timeoutMs: 120_000 });
      const out = { id: sbx.sandboxId };
      const tries = {
        volumeCreate: () => Volume.create("data"),
        volumeList: () => Volume.list(),
      };
      for (const [name, run] of Object.entries(tries)) {
        try { await run(); out[name] = { threw: false }; }
        catch (e) { out[name] = { threw: true, name: e.constructor.name, notFound: e instanceof SandboxNotFoundError, message: String(e.message) }; }
      }
      out.stillRunning = await sbx.isRunning();
      console.log(JSON.stringify(out));
    `);
    made.push(got.id);
    const want: Record<string, RegExp> = {
      volumeCreate: /^501: Creating a volume is not supported by this server yet$/,
      volumeList: /^501: Listing volumes is not supported by this server yet$/,
    };
    for (const [op, message] of Object.entries(want)) {
      assert.equal(got[op].threw, true, op);
      assert.equal(got[op].notFound, false, `${op} must not read as 'sandbox not found': ${JSON.stringify(got[op])}`);
      assert.match(got[op].message, message, op);
    }
    assert.equal(got.stillRunning, true);

    for (const [method, path] of [["GET", "/secrets"], ["DELETE", "/secrets/sec_1"], ["GET", "/volumes/v1"], ["POST", "/volumes"]]) {
      const r = await api(s, ca, method, path, { body: {} });
      assert.equal(r.status, 501, `${method} ${path} → ${r.body}`);
      assert.equal(r.json.code, 501);
      assert.match(r.json.message, /is not supported by this server yet$/);
    }
    assert.equal((await api(s, ca, "GET", "/volumes", { key: null })).status, 401, "a 501 route still needs a key");
    assert.equal((await api(s, ca, "GET", "/no/such/operation")).status, 404, "a path outside the spec stays a 404");
  });
});

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { request } from "node:https";
import { api, type ApiAnswer } from "../helpers/api-client.js";
import { NODE, ROOT, sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/sdk-run.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Runs `sandboxd <args>` (an admin command) to completion. */
function admin(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(NODE, [join(ROOT, "dist", "sandboxd"), ...args], { encoding: "utf8", timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** One API request authenticated by `Authorization: Bearer <token>` only. */
function bearer(s: Sandboxd, ca: Buffer, method: string, path: string, token: string): Promise<ApiAnswer> {
  return new Promise((resolve, reject) => {
    const headers = { host: `api.e2b.localhost:${s.port}`, authorization: `Bearer ${token}` };
    const req = request({ host: "127.0.0.1", port: s.port, path, method, ca, servername: "api.e2b.localhost", agent: false, headers }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: body ? JSON.parse(body) : undefined }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** E2B's IdentifierMaskingDetails of a key or token. */
const maskOf = (prefix: string, secret: string) => ({ prefix, valueLength: 40, maskedValuePrefix: secret.slice(prefix.length, prefix.length + 2), maskedValueSuffix: secret.slice(-4) });

describe("API keys and access tokens over the API (hashed, shown once, per team)", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let ca: Buffer;

  before(async () => {
    s = await startSandboxd();
    ca = readFileSync(s.caFile);
  });
  after(async () => {
    await s?.stop();
  });

  test("GET /api-keys lists the team's keys masked; POST makes one shown once; PATCH renames; DELETE revokes at once", async () => {
    const listed = await api(s, ca, "GET", "/api-keys");
    assert.equal(listed.status, 200, listed.body);
    assert.equal(listed.json.length, 1);
    const seeded = listed.json[0];
    assert.match(seeded.id, UUID);
    assert.deepEqual(seeded.mask, maskOf("e2b_", s.apiKey));
    assert.equal(seeded.createdBy, null);
    assert.equal(typeof seeded.name, "string");
    assert.ok(Number.isFinite(Date.parse(seeded.createdAt)) && Number.isFinite(Date.parse(seeded.lastUsed)), "createdAt and lastUsed (the key was just used) are dates");
    assert.ok(!listed.body.includes(s.apiKey.slice(4, 40)), "a listing never shows a key");

    const made = await api(s, ca, "POST", "/api-keys", { body: { name: "ci runner" } });
    assert.equal(made.status, 201, made.body);
    const key = String(made.json.key);
    assert.match(key, /^e2b_[0-9a-f]{40}$/);
    assert.match(made.json.id, UUID);
    assert.equal(made.json.name, "ci runner");
    assert.deepEqual(made.json.mask, maskOf("e2b_", key));
    assert.equal(made.json.lastUsed, null);

    // The new key works for the SDK at once, and is never shown again.
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      console.log(JSON.stringify({ n: (await Sandbox.list().nextItems()).length }));
    `, { env: { E2B_API_KEY: key } });
    assert.equal(got.n, 0);
    const after = await api(s, ca, "GET", "/api-keys");
    assert.equal(after.json.length, 2);
    assert.ok(!after.body.includes(key.slice(4)), "the made key is not in a later listing");
    const mine = after.json.find((k: { id: string }) => k.id === made.json.id);
    assert.ok(mine && Number.isFinite(Date.parse(mine.lastUsed)), "its use by the SDK is recorded");
    const files = readdirSync(s.dataDir).filter((f) => f.startsWith("sandboxd.db"));
    for (const f of files) assert.ok(!readFileSync(join(s.dataDir, f)).includes(key), `${f} holds only the key's hash`);

    const renamed = await api(s, ca, "PATCH", `/api-keys/${made.json.id}`, { body: { name: "nightly" } });
    assert.equal(renamed.status, 200, renamed.body);
    assert.equal((await api(s, ca, "GET", "/api-keys")).json.find((k: { id: string }) => k.id === made.json.id).name, "nightly");

    const del = await api(s, ca, "DELETE", `/api-keys/${made.json.id}`);
    assert.equal(del.status, 204, del.body);
    assert.equal((await api(s, ca, "GET", "/v2/sandboxes", { key })).status, 401, "a deleted key stops working at once");
    assert.equal((await api(s, ca, "DELETE", `/api-keys/${made.json.id}`)).status, 404);
    assert.equal((await api(s, ca, "PATCH", `/api-keys/${made.json.id}`, { body: { name: "x" } })).status, 404);
  });

  test("a team sees and touches only its own keys; the admin CLI lists API-made keys and revokes by their API ID", async () => {
    const blue = admin(["keys", "create", "--team", "blue-api", "--data-dir", s.dataDir]);
    assert.equal(blue.status, 0, blue.stderr);
    const blueKey = /^E2B_API_KEY=(e2b_[0-9a-f]{40})$/m.exec(blue.stdout)![1];
    const defaultKeys = (await api(s, ca, "GET", "/api-keys")).json as { id: string }[];
    const blueKeys = (await api(s, ca, "GET", "/api-keys", { key: blueKey })).json as { id: string; mask: unknown }[];
    assert.equal(blueKeys.length, 1);
    assert.deepEqual(blueKeys[0].mask, maskOf("e2b_", blueKey));
    for (const k of defaultKeys) {
      assert.equal((await api(s, ca, "DELETE", `/api-keys/${k.id}`, { key: blueKey })).status, 404, "another team's key is not found");
      assert.equal((await api(s, ca, "PATCH", `/api-keys/${k.id}`, { key: blueKey, body: { name: "mine now" } })).status, 404);
    }
    assert.equal((await api(s, ca, "GET", "/v2/sandboxes")).status, 200, "the default key still works");

    const viaApi = await api(s, ca, "POST", "/api-keys", { key: blueKey, body: { name: "second" } });
    assert.equal(viaApi.status, 201);
    const listed = admin(["keys", "list", "--team", "blue-api", "--data-dir", s.dataDir]);
    assert.equal(listed.stdout.trim().split("\n").length, 3, listed.stdout);
    const revoked = admin(["keys", "revoke", viaApi.json.id, "--data-dir", s.dataDir]);
    assert.equal(revoked.status, 0, revoked.stderr);
    assert.equal((await api(s, ca, "GET", "/teams", { key: viaApi.json.key })).status, 401);
  });

  test("bad bodies: 400 with the field, and nothing is made", async () => {
    const before = (await api(s, ca, "GET", "/api-keys")).json.length;
    for (const [body, want] of [
      [undefined, /request body must be a JSON object/],
      [{}, /field "name" is required/],
      [{ name: "" }, /field "name" must be 1 to 200 characters/],
      [{ name: "x".repeat(201) }, /field "name" must be 1 to 200 characters/],
      [{ name: "a\nb" }, /control characters/],
      [{ name: 5 }, /field "name" must be a string/],
      [{ name: "ok", scopes: ["all"] }, /field "scopes" is not supported/],
    ] as const) {
      for (const path of ["/api-keys", "/access-tokens"]) {
        const r = await api(s, ca, "POST", path, { body });
        assert.equal(r.status, 400, `${path} ${JSON.stringify(body)} → ${r.body}`);
        assert.match(r.json.message, want);
      }
    }
    assert.equal((await api(s, ca, "GET", "/api-keys")).json.length, before);
    assert.equal((await api(s, ca, "DELETE", "/api-keys/not-a-uuid")).status, 404);
    assert.equal((await api(s, ca, "GET", "/api-keys", { key: null })).status, 401);
  });

  test("access tokens: made once, authenticate as Bearer (not as X-API-Key), GET /teams with them; DELETE revokes", async () => {
    const made = await api(s, ca, "POST", "/access-tokens", { body: { name: "laptop" } });
    assert.equal(made.status, 201, made.body);
    const token = String(made.json.token);
    assert.match(token, /^sk_e2b_[0-9a-f]{40}$/);
    assert.match(made.json.id, UUID);
    assert.equal(made.json.name, "laptop");
    assert.deepEqual(made.json.mask, maskOf("sk_e2b_", token));
    assert.ok(Number.isFinite(Date.parse(made.json.createdAt)));

    const teams = await bearer(s, ca, "GET", "/teams", token);
    assert.equal(teams.status, 200, teams.body);
    assert.deepEqual(teams.json, [{ teamID: "default", name: "default", isDefault: true, apiKey: "" }]);
    const withKey = await api(s, ca, "GET", "/teams");
    assert.deepEqual(withKey.json, [{ teamID: "default", name: "default", isDefault: true, apiKey: s.apiKey }], "a key's caller gets that key back, as the CLI stores it");
    assert.equal((await bearer(s, ca, "GET", "/v2/sandboxes", token)).status, 200);
    assert.equal((await api(s, ca, "GET", "/v2/sandboxes", { key: token })).status, 401, "a token is not an API key");
    assert.ok(!(await api(s, ca, "GET", "/api-keys")).body.includes(made.json.id), "tokens are not listed as API keys");

    assert.equal((await api(s, ca, "DELETE", `/access-tokens/${made.json.id}`)).status, 204);
    const gone = await bearer(s, ca, "GET", "/teams", token);
    assert.equal(gone.status, 401);
    assert.match(gone.json.message, /access token/);
    assert.equal((await api(s, ca, "DELETE", `/access-tokens/${made.json.id}`)).status, 404);
  });

  test("a team holds at most 100 access tokens: any key can make them, so the store stays bounded", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) {
      const r = await api(s, ca, "POST", "/access-tokens", { body: { name: `t${i}` } });
      assert.equal(r.status, 201, r.body);
      ids.push(r.json.id);
    }
    const over = await api(s, ca, "POST", "/access-tokens", { body: { name: "one too many" } });
    assert.equal(over.status, 400);
    assert.match(over.json.message, /^a team can hold at most 100 access tokens: delete one first$/);
    assert.equal((await api(s, ca, "DELETE", `/access-tokens/${ids[0]}`)).status, 204);
    assert.equal((await api(s, ca, "POST", "/access-tokens", { body: { name: "fits again" } })).status, 201);
  });
});

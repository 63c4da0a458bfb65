import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { request } from "node:https";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { api } from "../helpers/api-client.js";
import { startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";

const RUNC = spawnSync("runc", ["--version"]).status === 0;
const INVALID_KEY = '{"code":401,"message":"Invalid API key, please visit https://e2b.dev/docs/api-key for more information."}';

/** The SDK's encoding of a metadata filter: encodeURIComponent per side, URLSearchParams, then the query encoding once more. */
function sdkMetadata(pairs: Record<string, string>): string {
  const inner = new URLSearchParams(Object.fromEntries(Object.entries(pairs).map(([k, v]) => [encodeURIComponent(k), encodeURIComponent(v)]))).toString();
  return encodeURIComponent(inner);
}

describe("control API over HTTPS (real sandboxd, real sandboxes)", { skip: RUNC ? false : "runc is not installed" }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  const call = (method: string, path: string, opts?: Parameters<typeof api>[4]) => api(s, ca, method, path, opts);

  before(async () => {
    s = await startSandboxd();
    ca = readFileSync(s.caFile);
  });
  after(async () => {
    await s?.stop();
  });

  test("auth: no key, a bad key and a key without e2b_ get 401 JSON; unknown routes 404, wrong methods 405", async () => {
    const missing = await call("GET", "/v2/sandboxes", { key: null });
    assert.equal(missing.status, 401);
    assert.equal(missing.json.code, 401);
    assert.match(missing.json.message, /X-API-Key/);
    const bad = await call("GET", "/v2/sandboxes", { key: "e2b_" + "0".repeat(40) });
    assert.equal(bad.status, 401);
    assert.equal(bad.body, INVALID_KEY);
    assert.equal((await call("GET", "/sandboxes", { key: s.apiKey.slice(4) })).body, INVALID_KEY);
    assert.equal((await call("GET", "/sandboxes/NOT-AN-ID", { key: null })).status, 401, "auth comes before the ID's check");
    assert.equal((await call("POST", "/sandboxes", { key: null, body: { templateID: "base" } })).status, 401);
    const unknown = await call("GET", "/nope");
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.code, 404);
    const wrong = await call("PUT", "/sandboxes");
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.allow, "POST, GET");
    const templates = await call("GET", "/templates");
    assert.equal(templates.status, 200);
    assert.equal(templates.json.length, 1);
    assert.deepEqual(templates.json[0].aliases, ["base"]);
    assert.match(templates.json[0].templateID, /^[a-z0-9]{20}$/);
    assert.equal(templates.json[0].cpuCount, 2);
    assert.equal(templates.json[0].memoryMB, 512);
    assert.deepEqual((await call("GET", "/templates/aliases/base")).json, { templateID: templates.json[0].templateID, public: false });
    assert.deepEqual((await call("GET", "/templates/aliases/nosuch")).json, { code: 404, message: "template 'nosuch' not found" });
  });

  test("validation: bad JSON, wrong types, missing template, timeout rules, network rule, 1 MiB cap, IDs", async () => {
    const cases: [unknown, number, RegExp][] = [
      [{}, 400, /^validation error: .*templateID/],
      [{ templateID: "base", timeout: "5" }, 400, /^validation error: .*timeout/],
      [{ templateID: "base", timeout: 1.5 }, 400, /^validation error: .*timeout/],
      [{ templateID: "base", metadata: { a: 1 } }, 400, /^validation error: .*metadata\.a/],
      [{ templateID: "base", envVars: [] }, 400, /^validation error: .*envVars/],
      [{ templateID: "base", secure: "yes" }, 400, /^validation error: .*secure/],
      [{ templateID: "base", timeout: 0 }, 400, /^Timeout must be greater than 0$/],
      [{ templateID: "base", timeout: 25 * 3600 }, 400, /^Timeout cannot be greater than 24 hours$/],
      [{ templateID: "nosuch" }, 404, /^template 'nosuch' not found$/],
      [{ templateID: "base:v2" }, 404, /^tag 'v2' does not exist/],
      [{ templateID: "Bad Name!" }, 400, /invalid template reference/],
      [{ templateID: "base", secure: false, network: { allowPublicTraffic: false } }, 400, /^You cannot create a sandbox without public access unless you enable secure envd access via 'secure' flag\.$/],
      [[1], 400, /^validation error: /],
    ];
    for (const [body, status, message] of cases) {
      const r = await call("POST", "/sandboxes", { body });
      assert.equal(r.status, status, JSON.stringify(body) + " → " + r.body);
      assert.equal(r.json.code, status);
      assert.match(r.json.message, message, JSON.stringify(body));
    }
    const notJson = await call("POST", "/sandboxes", { raw: "{nope" });
    assert.equal(notJson.status, 400);
    assert.match(notJson.json.message, /^validation error: /);
    const huge = await call("POST", "/sandboxes", { raw: JSON.stringify({ templateID: "base", metadata: { a: "x".repeat(1024 * 1024) } }) });
    assert.equal(huge.status, 413);
    assert.equal(huge.json.code, 413);

    assert.deepEqual((await call("GET", "/sandboxes/ABC")).json, { code: 400, message: "Invalid sandbox ID" });
    assert.deepEqual((await call("DELETE", "/sandboxes/a%2Fb")).json, { code: 400, message: "Invalid sandbox ID" });
    assert.deepEqual((await call("GET", "/sandboxes/inosuch")).json, { code: 404, message: `Sandbox "inosuch" doesn't exist or you don't have access to it` });
    assert.equal((await call("DELETE", "/sandboxes/inosuch")).status, 404);
    assert.equal((await call("POST", "/sandboxes/inosuch/pause")).status, 404);
    assert.equal((await call("POST", "/sandboxes/inosuch/timeout", { body: { timeout: 5 } })).status, 404);
    assert.equal((await call("POST", "/sandboxes/inosuch/connect", { body: { timeout: 5 } })).status, 404);
    assert.match((await call("POST", "/sandboxes/inosuch/timeout", { body: {} })).json.message, /^validation error: .*timeout/);

    for (const q of ["order=up", "limit=0", "limit=x", "state=gone", "nextToken=%%%", "nextToken=" + Buffer.from("x").toString("base64url"), "metadata=a", "template=base:v1"]) {
      const r = await call("GET", "/v2/sandboxes?" + q);
      assert.equal(r.status, 400, q + " → " + r.body);
      assert.equal(r.json.code, 400);
    }
  });

  test("create, get, v2 paging with a cursor both ways, metadata filters with & = % +, pause, the concurrency limit, kill", async () => {
    const special = "a&b=c%d e+f";
    const made: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await call("POST", "/sandboxes", { body: { templateID: "base", timeout: 120, metadata: { n: String(i), v: i === 1 ? special : "plain" }, envVars: { X: "1" } } });
      assert.equal(r.status, 201, r.body);
      assert.deepEqual(Object.keys(r.json).sort(), ["alias", "clientID", "domain", "envdVersion", "sandboxID", "templateID", "trafficAccessToken"]);
      assert.equal(r.json.clientID, "6532622b");
      assert.equal(r.json.domain, null);
      assert.equal(r.json.trafficAccessToken, null);
      assert.equal(r.json.alias, "base");
      assert.match(r.json.sandboxID, /^i[a-z0-9]{20}$/);
      made.push(r.json.sandboxID);
    }
    const secure = await call("POST", "/v2/sandboxes", { body: { templateID: "base", timeout: 120, network: { allowPublicTraffic: false } } });
    assert.equal(secure.status, 201, secure.body);
    assert.match(secure.json.envdAccessToken, /^[0-9a-f]{64}$/);
    assert.match(secure.json.trafficAccessToken, /^[0-9a-f]{64}$/);
    made.push(secure.json.sandboxID);

    const detail = await call("GET", `/sandboxes/${made[1]}-6532622b`);
    assert.equal(detail.status, 200, detail.body);
    assert.equal(detail.json.sandboxID, made[1]);
    assert.equal(detail.json.state, "running");
    assert.deepEqual(detail.json.metadata, { n: "1", v: special });
    assert.equal(detail.json.lifecycle.onTimeout, "kill");
    assert.ok(Date.parse(detail.json.endAt) - Date.parse(detail.json.startedAt) === 120_000);

    // Paging: 4 running, pages of 3 then 1, in both orders, covering every sandbox exactly once.
    for (const order of ["desc", "asc"] as const) {
      const first = await call("GET", `/v2/sandboxes?limit=3&order=${order}`);
      assert.equal(first.status, 200);
      assert.equal(first.json.length, 3);
      assert.equal(first.headers["x-total-running"], "4");
      const token = first.headers["x-next-token"] as string;
      assert.ok(token, "a next token while more rows exist");
      const second = await call("GET", `/v2/sandboxes?limit=3&order=${order}&nextToken=${encodeURIComponent(token)}`);
      assert.equal(second.json.length, 1);
      assert.equal(second.headers["x-next-token"], undefined);
      const ids = [...first.json, ...second.json].map((x: { sandboxID: string }) => x.sandboxID);
      assert.deepEqual([...ids].sort(), [...made].sort());
      const starts = [...first.json, ...second.json].map((x: { startedAt: string }) => Date.parse(x.startedAt));
      assert.deepEqual(starts, [...starts].sort((a, b) => (order === "desc" ? b - a : a - b)));
      const other = order === "desc" ? "asc" : "desc";
      assert.deepEqual((await call("GET", `/v2/sandboxes?limit=3&order=${other}&nextToken=${encodeURIComponent(token)}`)).json, { code: 400, message: "Invalid next token" });
    }
    assert.equal((await call("GET", "/v2/sandboxes?limit=1000")).json.length, 4);

    const bySpecial = await call("GET", `/v2/sandboxes?metadata=${sdkMetadata({ v: special })}`);
    assert.deepEqual(bySpecial.json.map((x: { sandboxID: string }) => x.sandboxID), [made[1]]);
    const byTwo = await call("GET", `/v2/sandboxes?metadata=${sdkMetadata({ v: "plain", n: "2" })}`);
    assert.deepEqual(byTwo.json.map((x: { sandboxID: string }) => x.sandboxID), [made[2]]);
    assert.equal(byTwo.headers["x-total-running"], "1");
    const v1 = await call("GET", `/sandboxes?metadata=${sdkMetadata({ v: special })}`);
    assert.deepEqual(v1.json.map((x: { sandboxID: string }) => x.sandboxID), [made[1]]);
    assert.deepEqual((await call("GET", `/v2/sandboxes?metadata=${sdkMetadata({ v: "none" })}`)).json, []);

    assert.equal((await call("POST", `/sandboxes/${made[0]}/pause`)).status, 204);
    assert.deepEqual((await call("POST", `/sandboxes/${made[0]}/pause`)).json, { code: 409, message: `Error pausing sandbox - sandbox '${made[0]}' is already paused` });
    const paused = await call("GET", "/v2/sandboxes?state=paused");
    assert.deepEqual(paused.json.map((x: { sandboxID: string; state: string }) => [x.sandboxID, x.state]), [[made[0], "paused"]]);
    assert.equal(paused.headers["x-total-running"], undefined);
    assert.equal((await call("GET", "/sandboxes")).json.length, 3, "v1 lists running sandboxes only");
    assert.equal((await call("POST", `/sandboxes/${made[0]}/timeout`, { body: { timeout: 5 } })).status, 404, "a paused sandbox has no timeout to set");
    assert.equal((await call("POST", `/sandboxes/${made[1]}/resume`, { body: { timeout: 5 } })).status, 409);
    const resumed = await call("POST", `/sandboxes/${made[0]}/resume`, { body: { timeout: 60 } });
    assert.equal(resumed.status, 201, resumed.body);
    assert.equal((await call("GET", `/sandboxes/${made[0]}`)).json.state, "running");

    // Another team's key sees none of it and cannot touch it.
    const otherKey = "e2b_" + "ab".repeat(20);
    const tdb = new DatabaseSync(join(s.dataDir, "sandboxd.db"));
    tdb.prepare("INSERT INTO teams (id, name) VALUES ('other', 'other')").run();
    tdb.prepare("INSERT INTO api_keys (hash, masked, team_id, created_at) VALUES (?, 'e2b_abab…abab', 'other', '')").run(createHash("sha256").update(otherKey).digest("hex"));
    // A third team's template, private to it (the default team's base is every team's).
    tdb.prepare("INSERT INTO teams (id, name) VALUES ('third', 'third')").run();
    tdb.prepare(`INSERT INTO templates (id, alias, team_id, cpu_count, memory_mb, disk_mb, envd_version, rootfs, build_id, created_at, updated_at)
      VALUES ('secrettemplate000001', 'secret', 'third', 1, 256, 1024, '0.6.13', '/nonexistent', 'b1', '', '')`).run();
    tdb.close();
    const other = (method: string, path: string, body?: unknown) => call(method, path, { key: otherKey, body });
    assert.deepEqual((await other("GET", "/v2/sandboxes")).json, []);
    assert.deepEqual((await other("GET", "/sandboxes")).json, []);
    assert.deepEqual((await other("GET", "/templates")).json, []);
    assert.deepEqual((await other("GET", `/sandboxes/${made[0]}`)).json, { code: 404, message: `Sandbox "${made[0]}" doesn't exist or you don't have access to it` });
    for (const [method, path, body] of [["DELETE", ""], ["POST", "/pause"], ["POST", "/connect", { timeout: 5 }], ["POST", "/timeout", { timeout: 5 }], ["POST", "/refreshes"], ["POST", "/resume"]] as const) {
      assert.equal((await other(method, `/sandboxes/${made[0]}${path}`, body)).status, 404, method + path);
    }
    assert.deepEqual((await other("POST", "/sandboxes", { templateID: "secret" })).json, { code: 403, message: "you don't have access to template 'secret'" });
    assert.equal((await call("GET", `/sandboxes/${made[0]}`)).json.state, "running", "still running for its own team");

    // connect on a running sandbox extends and never shortens (200); timeout may shorten; refreshes extends.
    const endOf = async (id: string) => Date.parse((await call("GET", `/sandboxes/${id}`)).json.endAt);
    const end0 = await endOf(made[2]);
    const kept = await call("POST", `/v2/sandboxes/${made[2]}/connect`, { body: { timeout: 10 } });
    assert.equal(kept.status, 200, kept.body);
    assert.equal(kept.json.sandboxID, made[2]);
    assert.equal(await endOf(made[2]), end0, "connect with a shorter timeout leaves endAt");
    assert.equal((await call("POST", `/sandboxes/${made[2]}/connect`, { body: { timeout: 600 } })).status, 200);
    assert.ok((await endOf(made[2])) > end0 + 400_000);
    assert.equal((await call("POST", `/sandboxes/${made[2]}/timeout`, { body: { timeout: 30 } })).status, 204);
    const shortened = await endOf(made[2]);
    assert.ok(shortened < Date.now() + 31_000 && shortened > Date.now() + 25_000);
    assert.equal((await call("POST", `/sandboxes/${made[2]}/refreshes`, { body: { duration: 5 } })).status, 204);
    assert.equal(await endOf(made[2]), shortened, "a refresh shorter than what is left changes nothing");
    assert.equal((await call("POST", `/sandboxes/${made[2]}/refreshes`, { body: { duration: 90 } })).status, 204);
    assert.ok((await endOf(made[2])) > Date.now() + 85_000);
    assert.equal((await call("POST", `/sandboxes/${made[2]}/connect`, { body: { timeout: 25 * 3600 } })).status, 400);

    // The team's concurrency limit, lowered in the store under the running sandboxd.
    const db = new DatabaseSync(join(s.dataDir, "sandboxd.db"));
    db.exec("UPDATE teams SET max_concurrent = 4");
    db.close();
    assert.deepEqual((await call("POST", "/sandboxes", { body: { templateID: "base" } })).json, {
      code: 429,
      message: "you have reached the maximum number of concurrent E2B sandboxes (4). If you need more, please visit 'https://e2b.dev/docs/billing'",
    });

    for (const id of made) assert.equal((await call("DELETE", `/sandboxes/${id}`)).status, 204);
    assert.equal((await call("DELETE", `/sandboxes/${made[0]}`)).status, 404);
    assert.deepEqual((await call("GET", "/v2/sandboxes")).json, []);
    assert.equal((await call("GET", "/templates")).json[0].spawnCount, 4);
  });

  test("a create that fails in the runtime answers 500 naming the cause and leaves no row and no container", async () => {
    const db = new DatabaseSync(join(s.dataDir, "sandboxd.db"));
    try {
      const now = new Date().toISOString();
      db.prepare(`INSERT INTO templates (id, alias, team_id, cpu_count, memory_mb, disk_mb, envd_version, rootfs, build_id, created_at, updated_at)
        VALUES ('brokentemplate000001', 'broken', 'default', 1, 256, 1024, '0.6.13', '/nonexistent-rootfs-of-a-test', 'b1', ?, ?)`).run(now, now);
      const r = await call("POST", "/sandboxes", { body: { templateID: "broken", timeout: 30 } });
      assert.equal(r.status, 500, r.body);
      assert.equal(r.json.code, 500);
      assert.equal(r.json.error_code, "sandbox_create_failed");
      assert.match(r.json.message, /^Failed to create sandbox: starting the sandbox failed: .+/);
      assert.equal(Number((db.prepare("SELECT count(*) AS n FROM sandboxes").get() as { n: number }).n), 0);
      const runc = spawnSync("runc", ["--root", join(s.dataDir, "runc"), "list", "-q"], { encoding: "utf8" });
      assert.equal(runc.stdout.trim(), "");
    } finally {
      db.prepare("DELETE FROM templates WHERE id = 'brokentemplate000001'").run();
      db.close();
    }
  });

  test("operations racing on one sandbox run one at a time: no 500, one kill wins, the index follows", async () => {
    const made = await call("POST", "/sandboxes", { body: { templateID: "base", timeout: 60 } });
    assert.equal(made.status, 201, made.body);
    const id = made.json.sandboxID;
    const ops = await Promise.all([
      call("POST", `/sandboxes/${id}/pause`),
      call("POST", `/sandboxes/${id}/connect`, { body: { timeout: 30 } }),
      call("POST", `/sandboxes/${id}/pause`),
      call("POST", `/sandboxes/${id}/connect`, { body: { timeout: 30 } }),
      call("DELETE", `/sandboxes/${id}`),
      call("DELETE", `/sandboxes/${id}`),
      call("POST", `/sandboxes/${id}/timeout`, { body: { timeout: 30 } }),
    ]);
    const statuses = ops.map((o) => o.status);
    assert.ok(statuses.every((st) => st < 500), statuses.join(","));
    assert.equal(statuses.slice(4, 6).sort().join(","), "204,404", "exactly one kill removes it");
    assert.equal((await call("GET", `/sandboxes/${id}`)).status, 404);
    const proxied = await new Promise<number>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port: s.port, path: "/health", ca, servername: `49983-${id}.e2b.localhost`, agent: false, headers: { host: `49983-${id}.e2b.localhost:${s.port}` } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      req.end();
    });
    assert.equal(proxied, 502, "the proxy no longer routes to a killed sandbox");
  });
});

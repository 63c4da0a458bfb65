import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { api } from "../helpers/api-client.js";
import { runSdk } from "../helpers/sdk-run.js";
import { NODE, ROOT, sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";

/** Runs `sandboxd <args>` (an admin command) to completion. */
function sandboxd(args: string[], env: NodeJS.ProcessEnv = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(NODE, [join(ROOT, "dist", "sandboxd"), ...args], { encoding: "utf8", env: { ...process.env, ...env }, timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("teams and API keys: the CLI on a running sandboxd's store, isolation, limits, revocation", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  let blueKey = "";
  const blueSandboxes: string[] = [];

  before(async () => {
    s = await startSandboxd({ args: ["--network-cidr", "198.19.231.0/24"] });
    ca = readFileSync(s.caFile);
  });
  after(async () => {
    for (const id of blueSandboxes) await api(s, ca, "DELETE", `/sandboxes/${id}`, { key: blueKey }).catch(() => undefined);
    await s?.stop();
  });

  test("the first start prints the default team's ID beside its key; GET /teams names the key's team", async () => {
    assert.match(s.logs(), /^E2B_API_KEY=e2b_[0-9a-f]{40}\n# the key's team ID: default$/m);
    const r = await api(s, ca, "GET", "/teams");
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, [{ teamID: "default", name: "default", isDefault: true, apiKey: s.apiKey }]);
    assert.equal((await api(s, ca, "GET", "/teams", { key: "e2b_0000" })).status, 401);
  });

  test("keys create --team makes a team and a key the running server accepts at once; keys list masks; teams set limits", async () => {
    const made = sandboxd(["keys", "create", "--team", "blue", "--name", "Blue <team>", "--data-dir", s.dataDir]);
    assert.equal(made.status, 0, made.stderr);
    blueKey = /^E2B_API_KEY=(e2b_[0-9a-f]{40})$/m.exec(made.stdout)?.[1] ?? "";
    assert.ok(blueKey, made.stdout);
    assert.match(made.stdout, /# team ID: blue \(new team\); key ID: [0-9a-f]{12}/);
    const teams = await api(s, ca, "GET", "/teams", { key: blueKey });
    assert.deepEqual(teams.json, [{ teamID: "blue", name: "Blue <team>", isDefault: true, apiKey: blueKey }]);

    const listed = sandboxd(["keys", "list"], { SANDBOXD_DATA_DIR: s.dataDir });
    assert.equal(listed.status, 0, listed.stderr);
    assert.match(listed.stdout, /^KEY ID\s+TEAM\s+KEY\s+CREATED$/m);
    assert.match(listed.stdout, new RegExp(`^[0-9a-f]{12}\\s+blue\\s+e2b_[0-9a-f]{4}…${blueKey.slice(-4)}\\s`, "m"));
    assert.match(listed.stdout, /\sdefault\s/);
    assert.ok(!listed.stdout.includes(blueKey) && !listed.stdout.includes(s.apiKey), "keys list never shows a key");

    const set = sandboxd(["teams", "set", "blue", "--max-concurrent", "1", "--data-dir", s.dataDir]);
    assert.equal(set.status, 0, set.stderr);
    assert.match(set.stdout, /updated team blue: .*max concurrent 1/);
    const tl = sandboxd(["teams", "list", "--data-dir", s.dataDir]);
    assert.match(tl.stdout, /^blue\s+Blue <team>\s+1\s+24$/m);
  });

  test("CLI mistakes exit 2 with a message and change nothing", () => {
    const cases: [string[], RegExp][] = [
      [["keys", "create"], /a team ID is required/],
      [["keys", "create", "--team", "Bad Team!"], /a team ID is 1-63 of \[a-z0-9-\]/],
      [["keys", "revoke", "ffffffffffff"], /no key matches 'ffffffffffff'/],
      [["keys", "revoke"], /keys revoke takes one key ID/],
      [["teams", "set", "blue", "--max-concurrent=-1"], /--max-concurrent must be a whole number/],
      [["teams", "create", "blue"], /team 'blue' already exists/],
      [["keys", "frobnicate"], /unknown command 'keys frobnicate'/],
      [["keys", "list", "--bogus"], /Unknown option '--bogus'/],
    ];
    const keysBefore = sandboxd(["keys", "list", "--data-dir", s.dataDir]).stdout;
    const teamsBefore = sandboxd(["teams", "list", "--data-dir", s.dataDir]).stdout;
    for (const [args, msg] of cases) {
      const r = sandboxd([...args, "--data-dir", s.dataDir]);
      assert.equal(r.status, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, msg, args.join(" "));
    }
    assert.equal(sandboxd(["keys", "list", "--data-dir", s.dataDir]).stdout, keysBefore);
    assert.equal(sandboxd(["teams", "list", "--data-dir", s.dataDir]).stdout, teamsBefore);
    const empty = mkdtempSync(join(tmpdir(), "sandboxd-nostore-"));
    try {
      const r = sandboxd(["keys", "list", "--data-dir", empty]);
      assert.equal(r.status, 2);
      assert.match(r.stderr, /no sandboxd store at .*sandboxd\.db/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  test("teams are isolated on every route; the team's concurrency limit answers 429 with E2B's message", async () => {
    const made = await api(s, ca, "POST", "/sandboxes", { key: blueKey, body: { templateID: "base", timeout: 120, metadata: { owner: "blue" } } });
    assert.equal(made.status, 201, made.body);
    const id = made.json.sandboxID as string;
    blueSandboxes.push(id);

    const over = await api(s, ca, "POST", "/sandboxes", { key: blueKey, body: { templateID: "base", timeout: 120 } });
    assert.equal(over.status, 429);
    assert.deepEqual(over.json, { code: 429, message: "you have reached the maximum number of concurrent E2B sandboxes (1). If you need more, please visit 'https://e2b.dev/docs/billing'" });
    // The SDK sees the same limit as a RateLimitError (after its own retries).
    const sdk = await runSdk(s, `
      import { Sandbox } from "e2b";
      const e = await Sandbox.create({ timeoutMs: 60_000 }).then(() => undefined, (e) => e);
      console.log(JSON.stringify({ name: e?.name, message: e?.message }));
    `, { env: { E2B_API_KEY: blueKey } });
    assert.equal(sdk.name, "RateLimitError");
    assert.match(sdk.message, /maximum number of concurrent E2B sandboxes \(1\)/);

    // The default team sees none of blue's sandbox.
    const notFound = { code: 404, message: `Sandbox "${id}" doesn't exist or you don't have access to it` };
    for (const [method, path, body] of [
      ["GET", `/sandboxes/${id}`],
      ["GET", `/sandboxes/${id}/metrics`],
      ["POST", `/sandboxes/${id}/connect`, { timeout: 10 }],
      ["POST", `/sandboxes/${id}/timeout`, { timeout: 10 }],
      ["POST", `/sandboxes/${id}/refreshes`, { duration: 10 }],
      ["POST", `/sandboxes/${id}/pause`],
      ["POST", `/sandboxes/${id}/resume`, { timeout: 10 }],
      ["DELETE", `/sandboxes/${id}`],
    ] as [string, string, unknown?][]) {
      const r = await api(s, ca, method, path, { body });
      assert.equal(r.status, 404, `${method} ${path}: ${r.body}`);
      assert.deepEqual(r.json, notFound, `${method} ${path}`);
    }
    const mine = await api(s, ca, "GET", "/v2/sandboxes?state=running,paused");
    assert.ok(!mine.json.some((x: { sandboxID: string }) => x.sandboxID === id));
    assert.ok(!(await api(s, ca, "GET", "/sandboxes")).json.some((x: { sandboxID: string }) => x.sandboxID === id));
    assert.deepEqual((await api(s, ca, "GET", `/sandboxes/metrics?sandbox_ids=${id}`)).json, { sandboxes: {} });
    assert.equal((await api(s, ca, "GET", "/teams/blue/metrics")).status, 403);
    assert.equal((await api(s, ca, "GET", "/teams/default/metrics", { key: blueKey })).status, 403);
    const prom = await api(s, ca, "GET", "/metrics");
    assert.ok(!prom.body.includes(id) && !prom.body.includes('team_id="blue"'), "the default team's Prometheus text has nothing of blue");

    // Blue sees its own, and the default team's templates stay the default team's (base is shared for creates).
    const blueList = await api(s, ca, "GET", "/v2/sandboxes", { key: blueKey });
    assert.deepEqual(blueList.json.map((x: { sandboxID: string }) => x.sandboxID), [id]);
    assert.deepEqual((await api(s, ca, "GET", "/templates", { key: blueKey })).json, []);
    assert.equal((await api(s, ca, "GET", `/sandboxes/${id}`, { key: blueKey })).json.metadata.owner, "blue");
    assert.match((await api(s, ca, "GET", "/metrics", { key: blueKey })).body, /sandboxd_team_sandboxes\{team_id="blue",state="running"\} 1/);

    const killed = await api(s, ca, "DELETE", `/sandboxes/${id}`, { key: blueKey });
    assert.equal(killed.status, 204);
    blueSandboxes.pop();
  });

  test("keys revoke (by key ID or the key) takes effect on the running server at once", async () => {
    const second = sandboxd(["keys", "create", "--team", "blue", "--data-dir", s.dataDir]);
    const secondKey = /^E2B_API_KEY=(e2b_[0-9a-f]{40})$/m.exec(second.stdout)?.[1] ?? "";
    assert.match(second.stdout, /# team ID: blue; key ID/);
    const keyId = /key ID: ([0-9a-f]{12})/.exec(second.stdout)?.[1] ?? "";
    assert.equal((await api(s, ca, "GET", "/teams", { key: secondKey })).status, 200);

    const byId = sandboxd(["keys", "revoke", keyId, "--data-dir", s.dataDir]);
    assert.equal(byId.status, 0, byId.stderr);
    assert.equal(byId.stdout, "revoked 1 key\n");
    const after = await api(s, ca, "GET", "/teams", { key: secondKey });
    assert.equal(after.status, 401);
    assert.match(after.json.message, /^Invalid API key/);
    assert.equal((await api(s, ca, "GET", "/teams", { key: blueKey })).status, 200, "the team's other key still works");

    const byKey = sandboxd(["keys", "revoke", blueKey, "--data-dir", s.dataDir]);
    assert.equal(byKey.status, 0, byKey.stderr);
    assert.ok(!byKey.stdout.includes(blueKey) && !byKey.stderr.includes(blueKey));
    assert.equal((await api(s, ca, "GET", "/v2/sandboxes", { key: blueKey })).status, 401);
    assert.equal((await api(s, ca, "GET", "/teams")).status, 200, "the default key is untouched");
    assert.ok(!s.logs().includes(blueKey) && !s.logs().includes(secondKey), "sandboxd never logs a key");
  });
});

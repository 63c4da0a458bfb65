import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { api } from "./helpers/api-client.js";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "./helpers/sandboxd.js";
import { runSdk } from "./helpers/sdk-run.js";

/** Seconds between a sandbox's start and its end, as GET /sandboxes/{id} reports them. */
function lifetimeS(detail: { startedAt: string; endAt: string }): number {
  return (Date.parse(detail.endAt) - Date.parse(detail.startedAt)) / 1000;
}

// The published SDK (2.51 and later) sends only what its caller set: every other field is the
// server's default, as E2B's spec of that version gives it.
describe("what the published SDK leaves to the server", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let ca: Buffer;

  before(async () => {
    s = await startSandboxd({ args: ["--warm-pool", "1"] });
    ca = readFileSync(s.caFile);
  });
  after(async () => {
    await s?.stop();
  });

  test("Sandbox.create() with no options lives 300 s (the v2 default: the SDK sends no timeout)", async () => {
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create();
      const info = await sbx.getInfo();
      const ran = (await sbx.commands.run("echo alive")).stdout;
      await sbx.kill();
      console.log(JSON.stringify({ startedAt: info.startedAt, endAt: info.endAt, ran }));
    `);
    assert.equal(got.ran, "alive\n");
    const life = lifetimeS(got);
    assert.ok(Math.abs(life - 300) <= 2, `lifetime ${life} s, expected 300 s`);
  });

  test("POST /sandboxes (v1) without a timeout keeps the spec's 15 s; POST /v2/sandboxes without one gets 300 s", async () => {
    for (const [path, want] of [["/sandboxes", 15], ["/v2/sandboxes", 300]] as const) {
      const made = await api(s, ca, "POST", path, { body: { templateID: "base" } });
      assert.equal(made.status, 201, made.body);
      const id = String(made.json.sandboxID);
      try {
        const detail = await api(s, ca, "GET", `/sandboxes/${id}`);
        assert.equal(detail.status, 200, detail.body);
        const life = lifetimeS(detail.json as { startedAt: string; endAt: string });
        assert.ok(Math.abs(life - want) <= 2, `${path}: lifetime ${life} s, expected ${want} s`);
      } finally {
        await api(s, ca, "DELETE", `/sandboxes/${id}`);
      }
    }
  });
});

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { api } from "../helpers/api-client.js";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/sdk-run.js";

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

  test("Sandbox.create() with no options: onTimeout kill, no auto-resume, public traffic, secured envd, the template's CPU and memory", async () => {
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create();
      const info = await sbx.getInfo();
      await sbx.kill();
      console.log(JSON.stringify({ id: sbx.sandboxId, lifecycle: info.lifecycle, network: info.network, cpuCount: info.cpuCount, memoryMB: info.memoryMB, templateId: info.templateId }));
    `);
    assert.deepEqual(got.lifecycle, { onTimeout: "kill", autoResume: false });
    assert.equal(got.network.allowPublicTraffic, true);
    const tpl = (await api(s, ca, "GET", "/templates")).json.find((t: { templateID: string }) => t.templateID === got.templateId);
    assert.equal(got.cpuCount, tpl.cpuCount);
    assert.equal(got.memoryMB, tpl.memoryMB);
  });

  test("the SDK's defaults for a sandbox it keeps: envd secured, onTimeout pause keeps memory, connect extends to 300 s, resume gives 15 s", async () => {
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create({ timeoutMs: 60_000, lifecycle: { onTimeout: "pause" } });
      const info = await sbx.getInfo();
      const t0 = Date.now();
      await Sandbox.connect(sbx.sandboxId);
      const connected = await sbx.getInfo();
      console.log(JSON.stringify({ id: sbx.sandboxId, lifecycle: info.lifecycle, t0, endAt: connected.endAt }));
    `);
    try {
      assert.deepEqual(got.lifecycle, { onTimeout: "pause", autoResume: false }, "onTimeout pause without keepMemory is a memory pause");
      const ext = (Date.parse(got.endAt) - got.t0) / 1000;
      assert.ok(ext >= 298 && ext <= 305, `connect without a timeout: the sandbox ends ${ext} s later, expected 300 s (ConnectSandboxV2's default)`);
      const detail = await api(s, ca, "GET", `/sandboxes/${got.id}`);
      assert.match(String(detail.json.envdAccessToken), /.{16,}/, "a v2 sandbox is always secured");

      assert.equal((await api(s, ca, "POST", `/sandboxes/${got.id}/pause`)).status, 204);
      const t1 = Date.now();
      const resumed = await api(s, ca, "POST", `/sandboxes/${got.id}/resume`);
      assert.equal(resumed.status, 201, resumed.body);
      const end = Date.parse((await api(s, ca, "GET", `/sandboxes/${got.id}`)).json.endAt);
      const life = (end - t1) / 1000;
      assert.ok(life >= 13 && life <= 20, `resume without a timeout: ${life} s, expected 15 s (ResumedSandbox's default)`);
    } finally {
      await api(s, ca, "DELETE", `/sandboxes/${got.id}`);
    }
  });
});

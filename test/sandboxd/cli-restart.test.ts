import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { call, sandboxSkipReason, startSandboxd, type Sandboxd } from "./helpers/sandboxd.js";

const skip = sandboxSkipReason();

describe("sandboxd serve: /health, and sandboxes across a SIGTERM and restart", { skip }, () => {
  const dataDir = mkdtempSync(join(tmpdir(), "sandboxd-restart-"));
  chmodSync(dataDir, 0o755);
  let s: Sandboxd | undefined;
  after(async () => {
    await s?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("GET /health is 200 once sandboxes can be made; a sandbox made then answers through the proxy, survives SIGTERM and is found by the next start", async () => {
    s = await startSandboxd({ dataDir });
    const ca = readFileSync(s.caFile);
    const health = await call(s.port, ca, "api.e2b.localhost", "/health");
    assert.equal(health.status, 200);
    assert.deepEqual(JSON.parse(health.body), { status: "ok" });

    const headers = { "x-api-key": s.apiKey };
    const made = await call(s.port, ca, "api.e2b.localhost", "/sandboxes", { method: "POST", headers, body: { templateID: "base", timeout: 300 } });
    assert.equal(made.status, 201, made.body);
    const id = (JSON.parse(made.body) as { sandboxID: string }).sandboxID;
    const envdHealth = () => call(s!.port, ca, `49983-${id}.e2b.localhost`, "/health");
    assert.equal((await envdHealth()).status, 204);

    assert.equal(await s.terminate("SIGTERM"), 0);
    const runc = spawnSync("runc", ["--root", join(dataDir, "runc"), "state", id], { encoding: "utf8" });
    assert.equal(runc.status, 0, runc.stderr);
    assert.equal((JSON.parse(runc.stdout) as { status: string }).status, "running");

    s = await startSandboxd({ dataDir });
    const got = await call(s.port, ca, "api.e2b.localhost", `/sandboxes/${id}`, { headers });
    assert.equal(got.status, 200, got.body);
    assert.equal((JSON.parse(got.body) as { state: string }).state, "running");
    assert.equal((await envdHealth()).status, 204);

    const killed = await call(s.port, ca, "api.e2b.localhost", `/sandboxes/${id}`, { method: "DELETE", headers });
    assert.equal(killed.status, 204);
    const gone = await envdHealth();
    assert.equal(gone.status, 502);
    assert.equal(gone.body, `{"sandboxId":"${id}","message":"The sandbox was not found","code":502}`);
  });
});

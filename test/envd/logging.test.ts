import { test } from "node:test";
import assert from "node:assert/strict";
import { startDaemon } from "./helpers/daemon.js";
import { clients } from "./helpers/clients.js";
import { fileSignature } from "../../src/envd/auth/signature.js";

test("one JSON access-log line per request, with operation id, route, code and duration, and no secrets", async () => {
  const d = await startDaemon();
  const token = "tok-SECRET-4f2a9c";
  const envValue = "ENV-VALUE-SECRET-77";
  try {
    const headers = { "x-access-token": token };
    assert.equal((await fetch(`${d.url}/init`, { method: "POST", body: JSON.stringify({ accessToken: token, envVars: { K: envValue } }) })).status, 204);
    const sig = fileSignature("/etc/hostname", "read", "", token);
    const dl = await fetch(`${d.url}/files?path=/etc/hostname&signature=${encodeURIComponent(sig)}`);
    await dl.arrayBuffer();
    const c = clients(d.url);
    await assert.rejects(c.fs.json.stat({ path: "/definitely/missing" }, { headers }));
    await c.proc.binary.list({}, { headers });
    await fetch(`${d.url}/envs`, { headers });
    // the host's probes log at debug only
    assert.equal((await fetch(`${d.url}/health`)).status, 204);
    await (await fetch(`${d.url}/metrics`, { headers })).arrayBuffer();
    await new Promise((r) => setTimeout(r, 200));
    const lines = d.logs().split("\n").filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    const requests = lines.filter((l) => l.msg === "request");
    assert.ok(requests.length >= 5);
    const ids = new Set(requests.map((l) => l.operation_id));
    assert.equal(ids.size, requests.length, "operation ids are unique");
    for (const l of requests) {
      assert.equal(typeof l.ms, "number");
      assert.equal(typeof l.status, "number");
      assert.equal(typeof l.path, "string");
    }
    const stat = requests.find((l) => l.path === "/filesystem.Filesystem/Stat");
    assert.equal(stat?.code, "not_found");
    assert.ok(requests.some((l) => l.path === "/process.Process/List" && l.code === undefined && l.status === 200));
    assert.ok(requests.some((l) => l.path === "/files" && l.status === 200));
    assert.deepEqual(requests.filter((l) => l.path === "/health" || l.path === "/metrics"), [], "probes are not logged at info");
    const raw = d.logs();
    for (const secret of [token, envValue, sig, encodeURIComponent(sig), "signature="]) {
      assert.equal(raw.includes(secret), false, `log leaks ${secret}`);
    }
  } finally {
    await d.stop();
  }
});

import { test } from "node:test";
import assert from "node:assert/strict";
import { startDaemon } from "./helpers/daemon.js";

test("legacy connect-python clients get the reduced filesystem schema and the marker header", async () => {
  const d = await startDaemon();
  try {
    const stat = (ua: string) =>
      fetch(`${d.url}/filesystem.Filesystem/Stat`, {
        method: "POST",
        headers: { "content-type": "application/json", "user-agent": ua },
        body: JSON.stringify({ path: "/etc/passwd" }),
      });
    const legacy = await stat("connect-python");
    assert.equal(legacy.headers.get("x-e2b-legacy-sdk"), "true");
    assert.deepEqual(await legacy.json(), { entry: { name: "passwd", type: "FILE_TYPE_FILE", path: "/etc/passwd" } });
    const modern = await stat("e2b-python-sdk/2.45.1");
    assert.equal(modern.headers.get("x-e2b-legacy-sdk"), null);
    const body = await modern.json();
    assert.equal(body.entry.owner, "root");
    assert.ok(body.entry.permissions);
    const list = await fetch(`${d.url}/filesystem.Filesystem/ListDir`, {
      method: "POST",
      headers: { "content-type": "application/json", "user-agent": "connect-python" },
      body: JSON.stringify({ path: "/etc", depth: 1 }),
    });
    const entries: Record<string, unknown>[] = (await list.json()).entries ?? [];
    assert.ok(entries.length > 5);
    for (const e of entries) assert.ok(Object.keys(e).every((k) => ["name", "path", "type"].includes(k)), JSON.stringify(e));
  } finally {
    await d.stop();
  }
});

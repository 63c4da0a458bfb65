import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { tempDir } from "../helpers/clients.js";

/** Starts a raw octet-stream upload, sends `sent` of `total` bytes, and leaves it hanging. */
function hangingUpload(d: Daemon, path: string, total: number, sent: number): net.Socket {
  const s = net.connect(d.port, "127.0.0.1");
  s.on("error", () => undefined);
  s.write(
    `POST /files?path=${encodeURIComponent(path)} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: ${total}\r\n\r\n`,
  );
  s.write(Buffer.alloc(sent, 0x61));
  return s;
}

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("SIGKILL during uploads: after restart no partial file at a target path and no temp file beside one", async () => {
  const runDir = mkdtempSync(join(tmpdir(), "envd-crash-run-"));
  const t = await tempDir("crash");
  const fresh = join(t.path, "fresh.bin");
  const existing = join(t.path, "existing.txt");
  writeFileSync(existing, "old content\n");
  const d1 = await startDaemon({ args: ["--run-dir", runDir] });
  try {
    const a = hangingUpload(d1, fresh, 10 << 20, 1 << 20);
    const b = hangingUpload(d1, existing, 10 << 20, 1 << 20);
    await until(() => existsSync(fresh) && statSync(fresh).size > 0);
    await until(() => readdirSync(t.path).some((n) => n.includes(".envd-upload.")));
    d1.proc.kill("SIGKILL");
    await d1.stop();
    a.destroy();
    b.destroy();
    assert.ok(existsSync(fresh), "the dead upload left a partial file (precondition)");

    const d2 = await startDaemon({ args: ["--run-dir", runDir] });
    try {
      assert.equal((await fetch(`${d2.url}/health`)).status, 204, "serves again immediately");
      await until(() => !existsSync(fresh) && !readdirSync(t.path).some((n) => n.includes(".envd-upload.")));
      assert.equal(readFileSync(existing, "utf8"), "old content\n");
      // And uploads work as before.
      const r = await fetch(`${d2.url}/files?path=${encodeURIComponent(fresh)}`, {
        method: "POST",
        headers: { "content-type": "application/octet-stream" },
        body: "complete",
      });
      assert.equal(r.status, 200);
      assert.equal(readFileSync(fresh, "utf8"), "complete");
      assert.deepEqual(readdirSync(join(runDir, "uploads")), [], "finished uploads leave no journal entry");
    } finally {
      await d2.stop();
    }
  } finally {
    await d1.stop();
    t.cleanup();
    rmSync(runDir, { recursive: true, force: true });
  }
});

test("an upload below an existing file is the client's mistake: 400 with a clear message", async () => {
  const t = await tempDir("under-file");
  const d = await startDaemon();
  try {
    writeFileSync(join(t.path, "plain"), "x");
    const r = await fetch(`${d.url}/files?path=${encodeURIComponent(join(t.path, "plain", "child.txt"))}`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream" },
      body: "y",
    });
    assert.equal(r.status, 400);
    assert.deepEqual(await r.json(), { code: 400, message: `error ensuring directories: path is a file: ${join(t.path, "plain")}` });
  } finally {
    await d.stop();
    t.cleanup();
  }
});

// Crash and restart: SIGKILL the daemon at a seeded random moment while many uploads (raw,
// gzip, multipart, h2c; new files and overwrites) are in flight. The restarted daemon serves
// at once, and every target holds its old content or one complete upload: no partial file at
// a target path and no temp file beside one. Processes started before the crash outlive it
// (unmanaged). Quick: 3 crashes; ENVD_SOAK=1: 20.
import { test } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { request as httpRequest } from "node:http";
import { createHash, randomBytes } from "node:crypto";
import { gzipSync } from "node:zlib";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDaemon, type Daemon } from "./helpers/daemon.js";
import { clients } from "./helpers/clients.js";
import { assertHealthy, budget, Rng, seeds, sleep } from "./helpers/fuzz.js";

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const TARGETS = 16;

/** Starts an upload that streams `content` slowly (so the crash finds it mid-way); never rejects. */
function slowUpload(d: Daemon, way: number, path: string, content: Buffer, h2: http2.ClientHttp2Session): Promise<number> {
  return new Promise((resolve) => {
    const q = `/files?path=${encodeURIComponent(path)}`;
    let body = content;
    let headers: Record<string, string> = { "content-type": "application/octet-stream" };
    if (way === 1) {
      body = gzipSync(content, { level: 1 });
      headers["content-encoding"] = "gzip";
    } else if (way === 2) {
      const b = "crashboundary";
      body = Buffer.concat([Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="file"; filename="x"\r\nContent-Type: application/octet-stream\r\n\r\n`), content, Buffer.from(`\r\n--${b}--\r\n`)]);
      headers = { "content-type": `multipart/form-data; boundary=${b}` };
    }
    const pieces = 8;
    const step = Math.ceil(body.length / pieces) || 1;
    let status = 0;
    const write = async (w: { write(b: Buffer): boolean; end(): void; destroyed: boolean }) => {
      for (let off = 0; off < body.length; off += step) {
        if (w.destroyed) return;
        w.write(body.subarray(off, off + step));
        await sleep(5 + ((off / step) % 3) * 10);
      }
      w.end();
    };
    if (way === 3) {
      const req = h2.request({ ":method": "POST", ":path": q, ...headers });
      req.on("response", (h) => (status = Number(h[":status"])));
      req.on("error", () => undefined);
      req.on("close", () => resolve(status));
      req.resume();
      void write(req).catch(() => undefined);
      return;
    }
    const req = httpRequest(`${d.url}${q}`, { method: "POST", headers: { ...headers, "content-length": String(body.length) }, agent: false });
    req.on("response", (res) => {
      status = res.statusCode ?? 0;
      res.resume();
    });
    req.on("error", () => undefined);
    req.on("close", () => resolve(status));
    void write(req).catch(() => undefined);
  });
}

/**
 * SHA-256 of a file's content, or "absent". Read in one step: the daemon's restart sweep may
 * remove a partial new file between an existsSync and a read.
 */
function contentSha(path: string): string {
  try {
    return sha(readFileSync(path));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "absent";
    throw err;
  }
}

test("SIGKILL during uploads: the restarted daemon serves at once; targets are old or whole, nothing partial", async (t) => {
  const runDir = mkdtempSync(join(tmpdir(), "envd-crash-run-"));
  const dir = mkdtempSync(join(tmpdir(), "envd-crash-files-"));
  chownSync(dir, 1001, 1001);
  const allowed = new Map<string, Set<string>>();
  for (let i = 0; i < TARGETS; i++) {
    const path = join(dir, `t${i}.bin`);
    if (i % 2 === 0) {
      const initial = Buffer.from(`initial ${i}\n`);
      writeFileSync(path, initial);
      chownSync(path, 1001, 1001); // the user's own file: uploads act as that user
      allowed.set(path, new Set([sha(initial)]));
    } else allowed.set(path, new Set(["absent"]));
  }
  let d = await startDaemon({ args: ["--run-dir", runDir] });
  const survivors: number[] = [];
  const restartMs: number[] = [];
  let partialAtKill = 0;
  try {
    // A process started before the first crash: it outlives the daemon (but is no longer managed).
    const it = clients(d.url).proc.binary.start({ process: { cmd: "/bin/sleep", args: ["120"] }, stdin: false, tag: "survivor" })[Symbol.asyncIterator]();
    survivors.push(((await it.next()).value!.event!.event.value as { pid: number }).pid);
    void it.return?.();

    for (const seed of seeds(budget(3, 20))) {
      const rng = new Rng(seed);
      const h2 = http2.connect(d.url, { maxSessionMemory: 512 });
      h2.on("error", () => undefined);
      const inflight: Promise<number>[] = [];
      for (let k = 0; k < 24; k++) {
        const path = join(dir, `t${rng.int(TARGETS)}.bin`);
        const content = randomBytes(rng.chance(0.3) ? 512 * 1024 + rng.int(2 << 20) : rng.int(128 * 1024));
        allowed.get(path)!.add(sha(content)); // any upload might complete before the kill
        inflight.push(slowUpload(d, rng.int(4), path, content, h2));
      }
      // Kill at a random moment once uploads are on disk (temp files or partial targets).
      const inFlight = () =>
        readdirSync(dir).filter((n) => n.includes(".envd-upload.")).length +
        [...allowed].filter(([p, ok]) => { const now = contentSha(p); return now !== "absent" && !ok.has(now); }).length;
      for (let i = 0; i < 100 && inFlight() === 0; i++) await sleep(10);
      await sleep(rng.int(80));
      partialAtKill += inFlight();
      d.proc.kill("SIGKILL");
      await d.stop();
      await Promise.all(inflight);
      h2.destroy();
      const t0 = Date.now();
      d = await startDaemon({ args: ["--run-dir", runDir] });
      const health = await fetch(`${d.url}/health`);
      restartMs.push(Date.now() - t0);
      assert.equal(health.status, 204, "serves again immediately");
      // The restart sweep removes what the dead uploads left; give it a moment.
      let leftovers: string[] = [];
      for (let i = 0; i < 50; i++) {
        leftovers = readdirSync(dir).filter((n) => n.includes(".envd-upload.") || !/^t\d+\.bin$/.test(n));
        const torn = [...allowed].filter(([p, ok]) => !ok.has(contentSha(p)));
        if (leftovers.length === 0 && torn.length === 0) break;
        await sleep(100);
      }
      assert.deepEqual(leftovers, [], `seed ${seed}: temp or stray files after restart`);
      for (const [path, ok] of allowed) {
        const now = contentSha(path);
        assert.ok(ok.has(now), `seed ${seed}: ${path} is neither its old content nor a complete upload (partial file)`);
      }
      // Settle the targets' "old content" for the next round.
      for (const [path, ok] of allowed) {
        ok.clear();
        ok.add(contentSha(path));
      }
    }
    t.diagnostic(`time from restart to the first /health 204 (ms): ${restartMs.join(", ")}; partial files at the kills: ${partialAtKill}`);
    assert.ok(partialAtKill > 0, "the kills found uploads in flight (otherwise this test proves nothing)");
    // Uploads work as before, and the run dir holds no journal entries of finished uploads.
    const r = await fetch(`${d.url}/files?path=${encodeURIComponent(join(dir, "after.bin"))}`, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: "after" });
    assert.equal(r.status, 200);
    const journal = join(runDir, "uploads");
    if (existsSync(journal)) assert.deepEqual(readdirSync(journal), [], "no journal entries remain");
    // The process started before the crashes still runs, but the new daemon does not know it.
    assert.doesNotThrow(() => process.kill(survivors[0], 0), "a process outlives a daemon crash");
    const listed = (await clients(d.url).proc.json.list({})).processes.map((p) => p.pid);
    assert.equal(listed.includes(survivors[0]), false);
    await assertHealthy(d, "after crashes");
  } finally {
    for (const pid of survivors) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(runDir, { recursive: true, force: true });
  }
});


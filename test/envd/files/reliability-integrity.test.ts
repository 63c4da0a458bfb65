// Integrity under load: concurrent uploads and downloads of random sizes over every way in
// (raw and gzip bodies, multipart, HTTP/1.1 and h2c, the e2b SDK), each verified by SHA-256;
// ranges checked byte for byte; readers racing overwrites see whole versions only.
// Quick: 200 files; ENVD_SOAK=1: 1,000.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { createHash, randomBytes } from "node:crypto";
import { gunzipSync, gzipSync } from "node:zlib";
import { chownSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { sdkSandbox } from "../helpers/clients.js";
import { assertHealthy, budget, pool, Rng } from "../helpers/fuzz.js";

let d: Daemon;
let dir: string;
let h2: http2.ClientHttp2Session;
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const KiB = 1024;
const MiB = 1024 * KiB;

before(async () => {
  dir = join("/tmp", `envd-integrity-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  chownSync(dir, 1001, 1001); // the user's workspace: uploads act as that user
  d = await startDaemon();
  // Node counts every body this client has queued against its session memory (10 MB default).
  h2 = http2.connect(d.url, { maxSessionMemory: 1024 });
  h2.on("error", () => undefined);
});

after(async () => {
  h2?.close();
  await d?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function h2Request(method: string, path: string, headers: Record<string, string>, body?: Uint8Array): Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = h2.request({ ":method": method, ":path": path, ...headers });
    const chunks: Buffer[] = [];
    let head: http2.IncomingHttpHeaders = {};
    req.on("response", (h) => (head = h));
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve({ status: Number(head[":status"]), headers: head, body: Buffer.concat(chunks) }));
    req.on("error", reject);
    req.end(body);
  });
}

const q = (p: string) => `/files?path=${encodeURIComponent(p)}`;

/** Uploads one file by the named way; resolves with the HTTP status. */
async function uploadBy(way: number, path: string, content: Buffer): Promise<number> {
  switch (way) {
    case 0: // raw body over HTTP/1.1
      return (await fetch(d.url + q(path), { method: "POST", headers: { "content-type": "application/octet-stream" }, body: new Uint8Array(content) })).status;
    case 1: // gzip-compressed raw body
      return (await fetch(d.url + q(path), { method: "POST", headers: { "content-type": "application/octet-stream", "content-encoding": "gzip" }, body: new Uint8Array(gzipSync(content, { level: 1 })) })).status;
    case 2: {
      // multipart, the file name carrying the path (the SDK's multi-file way)
      const form = new FormData();
      form.append("file", new Blob([new Uint8Array(content)]), path);
      return (await fetch(`${d.url}/files`, { method: "POST", body: form })).status;
    }
    default: // raw body over h2c
      return (await h2Request("POST", q(path), { "content-type": "application/octet-stream" }, content)).status;
  }
}

/** Downloads one file by the named way and returns its bytes. */
async function downloadBy(way: number, path: string): Promise<Buffer> {
  switch (way) {
    case 0: {
      const r = await fetch(d.url + q(path));
      assert.equal(r.status, 200, `GET ${path}`);
      return Buffer.from(await r.arrayBuffer());
    }
    case 1: {
      // Ask for gzip explicitly and decode it here (fetch would undo it transparently).
      const r = await h2Request("GET", q(path), { "accept-encoding": "gzip" });
      assert.equal(r.status, 200, `GET gzip ${path}`);
      return r.headers["content-encoding"] === "gzip" ? gunzipSync(r.body) : r.body;
    }
    default: {
      const r = await h2Request("GET", q(path), {});
      assert.equal(r.status, 200, `GET h2 ${path}`);
      return r.body;
    }
  }
}

function randomSize(rng: Rng): number {
  const p = rng.next();
  if (p < 0.05) return rng.int(8 * MiB);
  if (p < 0.3) return rng.int(MiB);
  return rng.int(64 * KiB);
}

test("concurrent uploads and downloads of random sizes: every SHA-256 matches", async (t) => {
  const n = budget(200, 1000);
  const rng = new Rng(20261122);
  const files = Array.from({ length: n }, (_, i) => ({ path: join(dir, `sub-${i % 17}`, `f-${i}.bin`), size: randomSize(rng), up: i % 4, down: i % 3 }));
  const mismatches: string[] = [];
  let bytes = 0;
  const t0 = Date.now();
  await pool(files, budget(200, 500), async (f) => {
    const content = randomBytes(f.size);
    bytes += f.size;
    const status = await uploadBy(f.up, f.path, content);
    assert.equal(status, 200, `upload ${f.path} by way ${f.up}`);
    const back = await downloadBy(f.down, f.path);
    if (sha(back) !== sha(content)) mismatches.push(`${f.path}: uploaded by ${f.up} (${f.size} B), downloaded by ${f.down} (${back.length} B)`);
  });
  t.diagnostic(`${n} files, ${Math.round(bytes / MiB)} MiB each way in ${Date.now() - t0} ms`);
  assert.deepEqual(mismatches, [], "SHA-256 mismatches");
  await assertHealthy(d, "after the integrity load");
});

test("byte ranges under load return exactly the requested bytes", async () => {
  const content = randomBytes(3 * MiB + 17);
  const path = join(dir, "ranges.bin");
  assert.equal(await uploadBy(0, path, content), 200);
  const rng = new Rng(7);
  const bad: string[] = [];
  await pool(Array.from({ length: budget(100, 1000) }, (_, i) => i), 32, async () => {
    const a = rng.int(content.length);
    const b = a + rng.int(Math.min(content.length - a, 512 * KiB));
    const r = await fetch(d.url + q(path), { headers: { range: `bytes=${a}-${b}` } });
    const got = Buffer.from(await r.arrayBuffer());
    if (r.status !== 206 || !got.equals(content.subarray(a, b + 1))) bad.push(`bytes=${a}-${b}: ${r.status}, ${got.length} B`);
  });
  assert.deepEqual(bad, []);
});

test("downloads racing overwrites of an existing file see one whole version, never a torn one", async () => {
  const path = join(dir, "versions.bin");
  const versions = new Set<string>();
  const first = randomBytes(512 * KiB);
  versions.add(sha(first));
  assert.equal(await uploadBy(0, path, first), 200);
  let writing = true;
  const writer = (async () => {
    for (let v = 0; v < budget(25, 200); v++) {
      const content = randomBytes(256 * KiB + ((v * 7919) % (768 * KiB)));
      versions.add(sha(content)); // before the upload: a reader may see it as soon as it lands
      assert.equal(await uploadBy(v % 2 ? 3 : 0, path, content), 200);
    }
    writing = false;
  })();
  const torn: string[] = [];
  let reads = 0;
  await Promise.all(
    Array.from({ length: 16 }, async (_, k) => {
      while (writing) {
        const got = await downloadBy(k % 3, path);
        reads++;
        if (!versions.has(sha(got))) torn.push(`read ${reads}: ${got.length} B matches no version`);
      }
    }),
  );
  await writer;
  assert.ok(reads > 20, `only ${reads} reads happened during the overwrites`);
  assert.deepEqual(torn, [], "a reader saw a torn file");
});

test("the e2b SDK: concurrent writes and reads round-trip exactly", async () => {
  const sbx = await sdkSandbox(d.url);
  const rng = new Rng(99);
  const bad: string[] = [];
  await pool(Array.from({ length: budget(40, 200) }, (_, i) => i), 20, async (i) => {
    const content = randomBytes(randomSize(rng));
    const path = join(dir, "sdk", `s-${i}.bin`);
    await sbx.files.write(path, new Blob([new Uint8Array(content)]));
    const back = Buffer.from(await sbx.files.read(path, { format: "bytes" }));
    if (sha(back) !== sha(content)) bad.push(`${path}: ${content.length} B written, ${back.length} B read`);
  });
  assert.deepEqual(bad, []);
});

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { tempDir } from "../helpers/clients.js";

const GiB = 1024 * 1024 * 1024;
const SIZE = 2 * GiB;
const BLOCK = 1024 * 1024;
/** Peak resident memory the daemon may reach while moving 2 GiB each way. */
const MAX_RSS_MIB = 300;

let d: Daemon;
let dir: { path: string; cleanup(): void };

before(async () => {
  d = await startDaemon();
  dir = await tempDir("files-large");
});

after(async () => {
  dir.cleanup();
  await d.stop();
});

/** Peak resident set size of a process in MiB (VmHWM). */
function peakRssMiB(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  assert.ok(m, "VmHWM readable");
  return Number(m[1]) / 1024;
}

/** Generated content: 64 distinct random 1 MiB blocks, cycled (written without copies). */
function* blocks(size: number): Generator<Buffer> {
  const pool = Array.from({ length: 64 }, () => randomBytes(BLOCK));
  for (let off = 0, n = 0; off < size; off += BLOCK, n++) {
    const b = pool[n % pool.length];
    yield size - off >= BLOCK ? b : b.subarray(0, size - off);
  }
}

test("2 GiB streamed upload and download with bounded daemon memory", { timeout: 120_000 }, async () => {
  const path = join(dir.path, "big.bin");
  const sent = createHash("sha256");
  const uploaded = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request(
      `${d.url}/files?path=${encodeURIComponent(path)}`,
      { method: "POST", headers: { "content-type": "application/octet-stream", "content-length": SIZE } },
      (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (c: string) => (body += c)).on("end", () => resolve({ status: res.statusCode!, body }));
      },
    );
    req.on("error", reject);
    const gen = blocks(SIZE);
    const pump = () => {
      for (;;) {
        const next = gen.next();
        if (next.done) return void req.end();
        sent.update(next.value);
        if (!req.write(next.value)) return void req.once("drain", pump);
      }
    };
    pump();
  });
  assert.equal(uploaded.status, 200, uploaded.body);
  assert.deepEqual(JSON.parse(uploaded.body), [{ path, name: "big.bin", type: "file" }]);
  assert.equal(statSync(path).size, SIZE);
  const afterUpload = peakRssMiB(d.pid);
  assert.ok(afterUpload < MAX_RSS_MIB, `daemon peak RSS after upload ${afterUpload.toFixed(0)} MiB`);

  const received = createHash("sha256");
  let bytes = 0;
  const status = await new Promise<number>((resolve, reject) => {
    request(`${d.url}/files?path=${encodeURIComponent(path)}`, (res) => {
      res.on("data", (c: Buffer) => {
        bytes += c.length;
        received.update(c);
      });
      res.on("end", () => resolve(res.statusCode!));
      res.on("error", reject);
    })
      .on("error", reject)
      .end();
  });
  assert.equal(status, 200);
  assert.equal(bytes, SIZE);
  assert.equal(received.digest("hex"), sent.digest("hex"));
  const afterDownload = peakRssMiB(d.pid);
  assert.ok(afterDownload < MAX_RSS_MIB, `daemon peak RSS after download ${afterDownload.toFixed(0)} MiB`);
});

test("512 MiB multipart upload keeps memory flat too", { timeout: 60_000 }, async () => {
  const path = join(dir.path, "multi.bin");
  const size = 512 * 1024 * 1024;
  const sent = createHash("sha256");
  const head = Buffer.from(`--B\r\nContent-Disposition: form-data; name="file"; filename="${path}"\r\nContent-Type: application/octet-stream\r\n\r\n`);
  const tail = Buffer.from("\r\n--B--\r\n");
  const status = await new Promise<number>((resolve, reject) => {
    const req = request(
      `${d.url}/files`,
      { method: "POST", headers: { "content-type": "multipart/form-data; boundary=B", "content-length": head.length + size + tail.length } },
      (res) => res.resume().on("end", () => resolve(res.statusCode!)),
    );
    req.on("error", reject);
    req.write(head);
    const gen = blocks(size);
    const pump = () => {
      for (;;) {
        const next = gen.next();
        if (next.done) return void req.end(tail);
        sent.update(next.value);
        if (!req.write(next.value)) return void req.once("drain", pump);
      }
    };
    pump();
  });
  assert.equal(status, 200);
  const onDisk = createHash("sha256").update(readFileSync(path)).digest("hex");
  assert.equal(onDisk, sent.digest("hex"));
  const peak = peakRssMiB(d.pid);
  assert.ok(peak < MAX_RSS_MIB, `daemon peak RSS ${peak.toFixed(0)} MiB`);
});

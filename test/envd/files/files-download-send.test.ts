import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { request } from "node:http";
import http2 from "node:http2";
import { join } from "node:path";
import { Writable } from "node:stream";
import { gunzipSync } from "node:zlib";
import { FileSender, SinkClosed } from "../../../src/envd/files/send.js";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { tempDir } from "../helpers/clients.js";

const CHUNK = 64 * 1024;
/** 1 MiB + a bit: many chunks, a short last one, distinct content per chunk. */
const DATA = randomBytes(16 * CHUNK + 1234);

let d: Daemon;
let dir: { path: string; cleanup(): void };
let file: string;

before(async () => {
  d = await startDaemon();
  dir = await tempDir("files-send");
  file = join(dir.path, "data.bin");
  writeFileSync(file, DATA);
});

after(async () => {
  dir.cleanup();
  await d.stop();
});

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/**
 * A writable that looks at each chunk only when it calls back, after a delay: if the sender
 * reused a buffer before its chunk was done with, the bytes seen here would be wrong.
 */
function lateSink(delayMs: number, failAfter = Infinity): { sink: Writable; received: () => Buffer } {
  const parts: Buffer[] = [];
  let n = 0;
  const sink = new Writable({
    highWaterMark: 1024,
    write(chunk: Buffer, _enc, cb) {
      if (++n > failAfter) return cb(new Error("sink failed"));
      setTimeout(() => {
        parts.push(Buffer.from(chunk));
        cb();
      }, delayMs);
    },
  });
  return { sink, received: () => Buffer.concat(parts) };
}

test("FileSender: reused buffers never change a chunk before the sink has called back", async () => {
  const fh = await open(file, "r");
  try {
    const { sink, received } = lateSink(2);
    const out = new FileSender(sink, CHUNK);
    await out.write(Buffer.from("head:"));
    await out.copy(fh, 100, DATA.length - 1);
    await out.write(Buffer.from(":tail"));
    await out.finish();
    assert.equal(sha(received()), sha(Buffer.concat([Buffer.from("head:"), DATA.subarray(100), Buffer.from(":tail")])));
  } finally {
    await fh.close();
  }
});

test("FileSender: without a start it reads from the current offset to EOF", async () => {
  const fh = await open(file, "r");
  try {
    await fh.read(Buffer.alloc(10), 0, 10, null);
    const { sink, received } = lateSink(0);
    const out = new FileSender(sink, CHUNK);
    await out.copy(fh);
    await out.finish();
    assert.ok(received().equals(DATA.subarray(10)));
  } finally {
    await fh.close();
  }
});

test("FileSender: a sink that fails or is destroyed mid-way rejects the copy instead of hanging", async () => {
  const fh = await open(file, "r");
  try {
    const failing = lateSink(1, 3);
    const out = new FileSender(failing.sink, CHUNK);
    await assert.rejects(out.copy(fh, 0, DATA.length - 1), /sink failed/);
    out.detach();

    const destroyed = lateSink(5);
    const out2 = new FileSender(destroyed.sink, CHUNK);
    setTimeout(() => destroyed.sink.destroy(), 15);
    await assert.rejects(out2.copy(fh, 0, DATA.length - 1), (err) => err instanceof SinkClosed || /destroyed/.test(String(err)));
    out2.detach();
  } finally {
    await fh.close();
  }
});

function get(path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    request(`${d.url}/files?path=${encodeURIComponent(path)}`, { headers: { "accept-encoding": "identity", ...headers } }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts) }));
      res.on("error", reject);
    })
      .on("error", reject)
      .end();
  });
}

test("HTTP/1.1: whole file and multi-chunk ranges arrive intact", async () => {
  const whole = await get(file);
  assert.equal(whole.status, 200);
  assert.equal(sha(whole.body), sha(DATA));

  const one = await get(file, { range: "bytes=1000-700000" });
  assert.equal(one.status, 206);
  assert.ok(one.body.equals(DATA.subarray(1000, 700001)));

  const many = await get(file, { range: "bytes=0-299999,500000-1048575" });
  assert.equal(many.status, 206);
  const text = many.body.toString("latin1");
  const first = DATA.subarray(0, 300000).toString("latin1");
  const second = DATA.subarray(500000, 1048576).toString("latin1");
  assert.ok(text.includes(first) && text.includes(second), "both parts present byte for byte");
  assert.equal(many.body.length, Number(many.headers["content-length"]));
});

test("HTTP/2: a whole download arrives intact, and a stream reset mid-body leaves the daemon serving", async () => {
  const session = http2.connect(d.url);
  try {
    const fetchAll = (headers: Record<string, string> = {}) =>
      new Promise<Buffer>((resolve, reject) => {
        const s = session.request({ ":path": `/files?path=${encodeURIComponent(file)}`, ...headers });
        const parts: Buffer[] = [];
        s.on("data", (c: Buffer) => parts.push(c));
        s.on("end", () => resolve(Buffer.concat(parts)));
        s.on("error", reject);
      });
    assert.equal(sha(await fetchAll()), sha(DATA));

    const big = join(dir.path, "big.bin");
    writeFileSync(big, Buffer.alloc(16 * 1024 * 1024, 3));
    await new Promise<void>((resolve, reject) => {
      const s = session.request({ ":path": `/files?path=${encodeURIComponent(big)}` });
      s.once("data", () => {
        s.close(http2.constants.NGHTTP2_CANCEL);
        resolve();
      });
      s.on("error", () => undefined);
      setTimeout(() => reject(new Error("no data")), 5000);
    });
    assert.equal(sha(await fetchAll()), sha(DATA));

    // The same through gzip (stored blocks for these random bytes), and a reset mid-way through
    // a deflated one (the big file is all one byte).
    assert.equal(sha(gunzipSync(await fetchAll({ "accept-encoding": "gzip" }))), sha(DATA));
    await new Promise<void>((resolve, reject) => {
      const s = session.request({ ":path": `/files?path=${encodeURIComponent(big)}`, "accept-encoding": "gzip" });
      s.once("data", () => {
        s.close(http2.constants.NGHTTP2_CANCEL);
        resolve();
      });
      s.on("error", () => undefined);
      setTimeout(() => reject(new Error("no data")), 5000);
    });
    assert.equal(sha(gunzipSync(await fetchAll({ "accept-encoding": "gzip" }))), sha(DATA));
  } finally {
    session.close();
  }
  const after = await get(file);
  assert.equal(sha(after.body), sha(DATA));
  assert.equal(d.proc.exitCode, null);
});

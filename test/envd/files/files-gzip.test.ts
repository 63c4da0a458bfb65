import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes, randomFillSync } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { gunzipSync, gzipSync } from "node:zlib";
import { Writable } from "node:stream";
import { compressible, GZIP_READ_BUFFER, sendGzip, type GzipHint, type GzipSource } from "../../../src/envd/files/adaptive-gzip.js";
import { sendBody } from "../../../src/envd/files/send.js";
import { startDaemon } from "../helpers/daemon.js";
import { tempDir } from "../helpers/clients.js";

/** Compressible text: repeated lines with varying numbers, like a log. */
function text(bytes: number): Buffer {
  const lines: string[] = [];
  let n = 0;
  for (let len = 0; len < bytes; n++) {
    const line = `2026-11-25T03:${String(n % 60).padStart(2, "0")} level=info msg="request done" path=/files?path=/home/user/f${n % 97} took=${(n * 7) % 1000}ms\n`;
    lines.push(line);
    len += line.length;
  }
  return Buffer.from(lines.join("")).subarray(0, bytes);
}

/**
 * Reads `data` like a file, in reads of at most `most` bytes (shorter than asked, as a pipe or a
 * file growing under the reader may give), through the buffers the encoder hands it.
 */
function fileLike(data: Buffer, most = Infinity): GzipSource {
  let pos = 0;
  return {
    async readv<T extends readonly NodeJS.ArrayBufferView[]>(buffers: T) {
      let budget = Math.min(most, data.length - pos);
      let bytesRead = 0;
      for (const b of buffers) {
        const n = data.copy(Buffer.from(b.buffer, b.byteOffset, b.byteLength), 0, pos, pos + Math.min(budget, b.byteLength));
        pos += n;
        budget -= n;
        bytesRead += n;
      }
      return { bytesRead, buffers };
    },
  };
}

/** A response stand-in that keeps a copy of every chunk when it takes it (the encoder reuses its buffers). */
function collector(): { sink: Writable; body: () => Buffer; writes: () => number } {
  const parts: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      parts.push(Buffer.from(chunk));
      setImmediate(cb);
    },
  });
  return { sink, body: () => Buffer.concat(parts), writes: () => parts.length };
}

async function gzipAll(data: Buffer, most = Infinity, hint?: GzipHint): Promise<Buffer> {
  const { sink, body } = collector();
  await sendBody(sink, (out) => sendGzip(out, fileLike(data, most), hint), GZIP_READ_BUFFER);
  return body();
}

test("adaptive gzip round-trips empty, tiny, random, text and mixed data, in odd read sizes", async () => {
  const mixed = Buffer.concat([text(1_500_000), randomBytes(2_300_000), text(700_000), randomBytes(10)]);
  for (const [name, data] of [["empty", Buffer.alloc(0)], ["tiny", Buffer.from("hi")], ["random", randomBytes(3_000_001)], ["text", text(2_500_000)], ["mixed", mixed]] as const) {
    // Whole reads, and short ones that end blocks (and segments) at odd places.
    for (const most of [Infinity, 1, 65_534, 65_536, 100_003]) {
      if (most === 1 && data.length > 100_000) continue;
      const gz = await gzipAll(data, most);
      assert.deepEqual(gunzipSync(gz), data, `${name} in reads of at most ${most}`);
    }
  }
});

test("random bytes go out stored (a few bytes of framing per 64 KiB); text shrinks like level 6", async () => {
  const rnd = randomBytes(4 << 20);
  const gz = await gzipAll(rnd);
  assert.ok(gz.length < rnd.length * 1.001, `random grew to ${gz.length}`);
  assert.ok(gz.length > rnd.length, "random data cannot shrink");
  assert.equal(compressible(rnd), false);
  const txt = text(4 << 20);
  const level6 = gzipSync(txt, { level: 6 }).length;
  const ours = (await gzipAll(txt)).length;
  assert.ok(ours <= level6 * 1.15, `text: ${ours} bytes against level 6's ${level6}`);
  const storedText = await gzipAll(txt, Infinity, "store");
  assert.deepEqual(gunzipSync(storedText), txt, "the store hint still yields valid gzip");
  assert.ok(storedText.length > txt.length, "the store hint stores");
});

test("the effort switches mid-stream: random stretches are stored, text stretches between them deflated", async () => {
  const parts = [text(2 << 20), randomBytes(2 << 20), text(2 << 20), randomBytes(1 << 20)];
  const data = Buffer.concat(parts);
  const gz = await gzipAll(data);
  assert.deepEqual(gunzipSync(gz), data);
  const textShrunk = 2 * gzipSync(parts[0], { level: 6 }).length;
  const random = 3 << 20;
  // Random bytes cannot shrink, so the text stretches must have been deflated; every segment
  // boundary falls on a stretch boundary, so only the stored blocks' framing is added beyond that.
  assert.ok(gz.length < random + textShrunk * 1.15 + 1024, `${gz.length} bytes: text was not deflated`);
  assert.ok(gz.length > random, "random stretches cannot shrink");
  // And judged segment by segment: a file that starts random still gets its text deflated.
  const flipped = Buffer.concat([parts[1], parts[0]]);
  const gz2 = await gzipAll(flipped);
  assert.deepEqual(gunzipSync(gz2), flipped);
  assert.ok(gz2.length < (2 << 20) + gzipSync(parts[0], { level: 6 }).length * 1.15 + 1024, `${gz2.length} bytes after a random start`);
});

test("a stored stream is valid to gunzip -t and to zlib at every read size", async (t) => {
  const data = randomBytes(600_000);
  for (const most of [Infinity, 65_535, 65_536, 131_071, 4097]) {
    const gz = await gzipAll(data, most, "store");
    assert.deepEqual(gunzipSync(gz), data, `reads of at most ${most}`);
    // The framing: header, then 5-byte stored block headers and the bytes, then an empty final block and the trailer.
    assert.ok(gz.length >= 10 + data.length + 5 * Math.ceil(data.length / 65_535) + 13);
  }
  const gz = await gzipAll(data, 100_000, "judge");
  const checked = spawnSync("gunzip", ["-t"], { input: gz });
  if (checked.error) return t.skip("no gunzip on this machine");
  assert.equal(checked.status, 0, checked.stderr.toString());
});

test("a read failing mid-stream rejects the encoder instead of hanging, and a failed response stops it", async () => {
  let reads = 0;
  const failing: GzipSource = {
    async readv<T extends readonly NodeJS.ArrayBufferView[]>(buffers: T) {
      if (++reads === 3) throw new Error("EIO");
      for (const b of buffers) randomFillSync(b);
      return { bytesRead: buffers.reduce((n, b) => n + b.byteLength, 0), buffers };
    },
  };
  const { sink } = collector();
  await assert.rejects(sendBody(sink, (out) => sendGzip(out, failing), GZIP_READ_BUFFER), /EIO/);

  const broken = new Writable({
    write(_chunk, _enc, cb) {
      cb(new Error("socket gone"));
    },
  });
  broken.on("error", () => undefined);
  await assert.rejects(sendBody(broken, (out) => sendGzip(out, fileLike(randomBytes(4 << 20))), GZIP_READ_BUFFER), /socket gone/);
});

test("GET /files with Accept-Encoding: gzip answers gzip of random, text, mixed, empty and compressed-type files", async () => {
  const d = await startDaemon();
  const t = await tempDir("files-gzip");
  try {
    const files: Record<string, Buffer> = {
      "r.bin": randomBytes(3 << 20),
      "t.log": text(3 << 20),
      "m.dat": Buffer.concat([text(1_100_000), randomBytes(1_500_000), text(900_001)]),
      "e.txt": Buffer.alloc(0),
      "a.zip": randomBytes(200_000),
    };
    for (const [name, data] of Object.entries(files)) await writeFile(join(t.path, name), data);
    for (const [name, data] of Object.entries(files)) {
      const res = await fetch(`${d.url}/files?path=${encodeURIComponent(join(t.path, name))}&username=root`, { headers: { "accept-encoding": "gzip" } });
      assert.equal(res.status, 200, name);
      assert.equal(res.headers.get("content-encoding"), "gzip", `${name}: gzip is the client's preferred coding`);
      assert.equal(res.headers.get("vary"), "Accept-Encoding");
      assert.deepEqual(Buffer.from(await res.arrayBuffer()), data, `${name} arrives intact`);
    }
  } finally {
    await d.stop();
    await t.cleanup();
  }
});

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { gunzipSync, gzipSync } from "node:zlib";
import { adaptiveGzip, compressible } from "../../src/envd/files/adaptive-gzip.js";
import { startDaemon } from "./helpers/daemon.js";
import { tempDir } from "./helpers/clients.js";

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

async function gzipAll(data: Buffer, chunk = 64 << 10, hint?: "judge" | "store"): Promise<Buffer> {
  async function* source() {
    for (let i = 0; i < data.length; i += chunk) yield data.subarray(i, i + chunk);
  }
  const out: Buffer[] = [];
  for await (const b of adaptiveGzip(source(), hint)) out.push(b);
  return Buffer.concat(out);
}

test("adaptive gzip round-trips empty, tiny, random, text and mixed data, in odd chunk sizes", async () => {
  const mixed = Buffer.concat([text(1_500_000), randomBytes(2_300_000), text(700_000), randomBytes(10)]);
  for (const [name, data] of [["empty", Buffer.alloc(0)], ["tiny", Buffer.from("hi")], ["random", randomBytes(3_000_001)], ["text", text(2_500_000)], ["mixed", mixed]] as const) {
    for (const chunk of [1, 65_535, 65_536, 1 << 20]) {
      if (chunk === 1 && data.length > 100_000) continue;
      const gz = await gzipAll(data, chunk);
      assert.deepEqual(gunzipSync(gz), data, `${name} in chunks of ${chunk}`);
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
  const storedText = await gzipAll(txt, 64 << 10, "store");
  assert.deepEqual(gunzipSync(storedText), txt, "the store hint still yields valid gzip");
  assert.ok(storedText.length > txt.length, "the store hint stores");
});

test("GET /files with Accept-Encoding: gzip answers gzip of random, text and compressed-type files", async () => {
  const d = await startDaemon();
  const t = await tempDir("files-gzip");
  try {
    const files: Record<string, Buffer> = { "r.bin": randomBytes(3 << 20), "t.log": text(3 << 20), "a.zip": randomBytes(200_000) };
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

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { gunzipSync, gzipSync } from "node:zlib";
import { adaptiveCompressionGzip } from "../../../src/envd/http/gzip-compression.js";

/** Protobuf-ish text: a directory listing's names and paths repeat with small changes. */
function listing(entries: number): Buffer {
  const parts: string[] = [];
  for (let i = 0; i < entries; i++) parts.push(`\n\x12file-${i}.txt\x1a/home/user/project/src/module-${i % 37}/file-${i}.txt r-x ${(i * 7919) % 65536}`);
  return Buffer.from(parts.join(""));
}

test("Connect gzip: incompressible messages are stored, compressible ones deflated, both valid gzip", async () => {
  const random = randomBytes(300_000);
  const stored = Buffer.from(await adaptiveCompressionGzip.compress(random));
  assert.deepEqual(gunzipSync(stored), random);
  assert.ok(stored.length > random.length && stored.length < random.length * 1.001, `random: ${stored.length} bytes`);

  const text = listing(5_000);
  const deflated = Buffer.from(await adaptiveCompressionGzip.compress(text));
  assert.deepEqual(gunzipSync(deflated), text);
  assert.ok(deflated.length <= gzipSync(text, { level: 6 }).length * 1.15, `text: ${deflated.length} bytes`);

  // A view into a larger buffer is compressed as its own bytes only.
  const view = new Uint8Array(Buffer.concat([Buffer.from("x".repeat(100)), text]).buffer, 100, text.length);
  assert.deepEqual(gunzipSync(await adaptiveCompressionGzip.compress(view)), text);
  assert.deepEqual(Buffer.from(await adaptiveCompressionGzip.decompress(deflated, 1 << 20)), text);
});

// The addon's extras besides inotify (src/envd/platform/addon.ts): base64 both ways against Buffer's
// own, the output pipe's capacity, and the pool that recycles big buffers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { closeSync, fstatSync, readSync, writeSync } from "node:fs";
import { addonExtra } from "../../../src/envd/platform/addon.js";
import { BufferPool } from "../../../src/envd/platform/buffer-pool.js";

const encode = addonExtra("base64Encode");
const decode = addonExtra("base64Decode");
const pipe = addonExtra("pipe");

test("the addon built by build.sh has every extra", () => {
  assert.ok(encode && decode && pipe && addonExtra("trimMalloc"));
});

test("base64Encode writes exactly Buffer's base64 at the offset, for every length mod 6 and across the fast loop", () => {
  for (const n of [...Array.from({ length: 40 }, (_, i) => i), 255, 4096, 65_535, 65_536, 65_537, 262_144]) {
    const src = randomBytes(n);
    const want = src.toString("base64");
    const dst = Buffer.alloc(7 + want.length + 3, 0x2a);
    const written = encode!(src, dst, 7);
    assert.equal(written, want.length, `${n}: length`);
    assert.equal(dst.toString("latin1", 7, 7 + written), want, `${n}: text`);
    assert.ok(dst.subarray(0, 7).every((b) => b === 0x2a) && dst.subarray(7 + written).every((b) => b === 0x2a), `${n}: nothing outside`);
  }
  // A view into a bigger buffer: only the view is read.
  const big = randomBytes(100);
  const view = big.subarray(10, 20);
  const out = Buffer.alloc(16);
  encode!(view, out, 0);
  assert.equal(out.toString("latin1"), Buffer.from(view).toString("base64"));
});

test("base64Encode refuses a destination too small or wrong argument types", () => {
  assert.throws(() => encode!(Buffer.alloc(3), Buffer.alloc(3), 0), RangeError);
  assert.throws(() => encode!(Buffer.alloc(3), Buffer.alloc(8), 6), RangeError);
  assert.throws(() => (encode as unknown as (a: unknown) => number)("abc"), TypeError);
});

test("base64Decode round-trips every length and rejects what is not strict base64", () => {
  for (let n = 0; n < 200; n++) {
    const src = randomBytes(n);
    const dst = Buffer.alloc(n);
    assert.equal(decode!(Buffer.from(src.toString("base64")), dst), n, `${n}: length`);
    assert.deepEqual(dst, src, `${n}: bytes`);
  }
  for (const bad of ["abc", "ab$=", "a=bc", "ab\ncd==", "abcd abc", "\xffbcd"]) {
    assert.equal(decode!(Buffer.from(bad, "latin1"), Buffer.alloc(16)), -1, JSON.stringify(bad));
  }
  assert.equal(decode!(Buffer.from("AAAA"), Buffer.alloc(2)), -1, "destination too small");
});

test("pipe gives a close-on-exec pipe with room for big reads", () => {
  const [r, w, capacity] = pipe!(1024 * 1024);
  try {
    assert.ok(fstatSync(r).isFIFO() && fstatSync(w).isFIFO());
    // Root may raise a pipe to 1 MiB (fs.pipe-max-size); anyone else gets at least the default.
    assert.ok(capacity >= (process.getuid?.() === 0 ? 1024 * 1024 : 65_536), `capacity ${capacity}`);
    const data = randomBytes(300 * 1024);
    if (capacity >= data.length) {
      assert.equal(writeSync(w, data), data.length, "a big write fits without a reader");
      const back = Buffer.alloc(data.length);
      let got = 0;
      while (got < data.length) got += readSync(r, back, got, data.length - got, null);
      assert.deepEqual(back, data);
    }
  } finally {
    closeSync(r);
    closeSync(w);
  }
});

test("BufferPool: reuses given buffers, keeps at most `keep`, ignores foreign sizes, lets all go when idle", async () => {
  const pool = new BufferPool(1024, 2, 50);
  const a = pool.take();
  const b = pool.take();
  const c = pool.take();
  assert.equal(a.length, 1024);
  pool.give(a);
  pool.give(b);
  pool.give(c);
  assert.equal(pool.freeCount, 2, "capped at keep");
  pool.give(Buffer.alloc(10));
  assert.equal(pool.freeCount, 2, "a buffer of another size is not taken");
  const again = pool.take();
  assert.ok(again === a || again === b, "a given buffer is handed out again");
  await new Promise((r) => setTimeout(r, 120));
  assert.equal(pool.freeCount, 0, "dropped after the idle time");
});

// A template's layer stack directory: what it holds, what the runtime reads from it, and what it refuses.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { overlayOptions, rootfsLayers, rootfsLowers, rootfsProbe, writeLayerStack } from "../../../src/sandboxd/host/overlay.js";

test("a published stack holds short links to its layers and the probed kinds; the runtime mounts the links topmost first", () => {
  const d = mkdtempSync(join(tmpdir(), "sandboxd-stack-unit-"));
  try {
    const merged = join(d, "merged");
    mkdirSync(join(merged, "bin"), { recursive: true });
    writeFileSync(join(merged, "bin", "sh"), "");
    const layers = ["base", "l1", "l2"].map((n) => join(d, n));
    const stack = join(d, "k.stack");
    writeLayerStack(stack, layers, merged);
    assert.deepEqual(readdirSync(stack).sort(), ["0", "1", "2", "facts.json"]);
    assert.equal(readlinkSync(join(stack, "2")), layers[2]);
    assert.deepEqual(rootfsLowers(stack), ["0", "1", "2"].map((n) => join(stack, n)));
    assert.deepEqual(rootfsLayers(stack), layers);
    assert.equal(rootfsProbe(stack, "bin/sh"), "file");
    assert.equal(rootfsProbe(stack, "home/user"), undefined);
    assert.match(overlayOptions({ lower: rootfsLowers(stack), upper: "/u", work: "/w" }), new RegExp(`lowerdir=${stack}/2:${stack}/1:${stack}/0,upperdir=/u`));
    // a plain tree is its own single lower, probed as it is
    assert.deepEqual(rootfsLowers(merged), [merged]);
    assert.equal(rootfsProbe(merged, "bin/sh"), "file");
    // a stack with anything besides its links and facts is refused, not guessed at
    writeFileSync(join(stack, "extra"), "");
    assert.throws(() => rootfsLowers(stack), /is damaged/);
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test("a stack too deep for one mount's options, or not named as a stack, is refused and leaves nothing", () => {
  const d = mkdtempSync(join(tmpdir(), "sandboxd-stack-unit-"));
  try {
    const layers = Array.from({ length: 300 }, (_, i) => join(d, `l${i}`));
    assert.throws(() => writeLayerStack(join(d, "deep.stack"), layers, d), /needs mount options longer than/);
    assert.throws(() => writeLayerStack(join(d, "plain"), layers.slice(0, 2), d), /must end in \.stack/);
    assert.deepEqual(readdirSync(d), []);
    assert.throws(() => overlayOptions({ lower: [join(d, "a:b")], upper: "/u", work: "/w" }), /contains a comma, colon/);
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

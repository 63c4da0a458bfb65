import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ImageStore } from "../../../src/sandboxd/templates/oci/store.js";

const digest = (c: string) => `sha256:${c.repeat(64)}`;

/** Publishes a fake unpacked image whose blobs are `blobs`, last used `ageMs` ago. */
async function fake(store: ImageStore, d: string, blobs: string[], ageMs: number): Promise<void> {
  const tmp = mkdtempSync(join(store.tmpDir, ".pull-"));
  mkdirSync(join(tmp, "rootfs"));
  for (const b of blobs) writeFileSync(join(store.blobDir, "sha256", b.slice(7)), "x");
  await store.publish(tmp, { digest: d, config: { env: {} }, fitness: { missing: [], warnings: [] }, ref: "r", blobs, bytes: 1 });
  const t = new Date(Date.now() - ageMs);
  utimesSync(join(store.dirOf(d), "image.json"), t, t);
}

test("the image cache: a team reuses only what it resolved itself; the sweep removes unused images after the grace period, all unheld ones under disk pressure, and blobs no kept image needs", async () => {
  const root = mkdtempSync(join(tmpdir(), "oci-store-"));
  try {
    const store = new ImageStore(root);
    const [a, b, c, shared] = ["a", "b", "c", "d"].map(digest);
    await fake(store, a, [a, shared], 0);
    await fake(store, b, [b, shared], 3 * 3600_000);
    await fake(store, c, [c], 3 * 3600_000);
    store.remember("team1", "docker.io/library/x:1", a);
    store.remember("team1", "docker.io/library/y:1", b);
    assert.equal(store.resolved("team1", "docker.io/library/x:1"), a);
    assert.equal(store.resolved("team2", "docker.io/library/x:1"), undefined, "another team resolves the name itself");

    const release = store.hold(c);
    const old = new Date(Date.now() - 3 * 3600_000);
    utimesSync(join(store.dirOf(c), "image.json"), old, old);
    const gone = await store.sweep({ graceMs: 3600_000, pressed: () => false, pulling: new Set() });
    assert.deepEqual(gone, [b], "old and unheld: removed; held (c) and recent (a): kept");
    assert.equal(store.resolved("team1", "docker.io/library/y:1"), undefined);
    assert.ok(existsSync(join(store.blobDir, "sha256", shared.slice(7))), "a blob a kept image needs stays");
    assert.ok(!existsSync(join(store.blobDir, "sha256", b.slice(7))));

    release();
    const pressed = await store.sweep({ graceMs: 3600_000, pressed: () => true, pulling: new Set() });
    assert.deepEqual(pressed.sort(), [a, c].sort(), "under pressure every unheld image goes");
    assert.equal(store.resolved("team1", "docker.io/library/x:1"), undefined);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

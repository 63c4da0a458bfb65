// What holds a template, in the words its delete refusal uses: sandboxes running, paused in memory
// and paused to disk from it, and snapshots taken of them; and a template name a snapshot has.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { templateHolders } from "../../../src/sandboxd/sandboxes/holders.js";
import { snapshotNameClash } from "../../../src/sandboxd/sandboxes/snapshots.js";
import type { SandboxRow } from "../../../src/sandboxd/store/sandboxes.js";
import { DEFAULT_TEAM_ID, registerBaseTemplate, seed } from "../../../src/sandboxd/store/seed.js";
import { openStore, type Store } from "../../../src/sandboxd/store/store.js";

let dir: string;
let store: Store;
let tpl: string;

before(() => {
  dir = mkdtempSync(join(tmpdir(), "holders-unit-"));
  store = openStore(join(dir, "sandboxd.db"));
  seed(store);
  tpl = registerBaseTemplate(store, { rootfs: join(dir, "rootfs"), envdVersion: "0.6.13" });
});
after(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const sandbox = (id: string, o: Partial<SandboxRow>): SandboxRow => ({
  id, teamID: DEFAULT_TEAM_ID, templateID: tpl, state: "running", startedAt: "2026-01-01T00:00:00.000Z", endAt: "2026-01-01T00:05:00.000Z", metadata: {},
  autoPause: false, secure: false, trafficToken: null, network: {}, allowInternetAccess: true, ip: null, envdPort: null, envdVersion: "0.6.13",
  cpuCount: 1, memoryMB: 256, diskSizeMB: 1024, ...o,
});

test("a template's holders are named by kind and count; none: undefined", () => {
  assert.equal(templateHolders(store, tpl), undefined);
  store.sandboxes.insert(sandbox("ia", { state: "starting" }));
  assert.equal(templateHolders(store, tpl), "1 running sandbox");
  store.sandboxes.insert(sandbox("ib", { state: "starting" }));
  store.sandboxes.update(sandbox("ib", { state: "paused", onDisk: true }));
  assert.equal(templateHolders(store, tpl), "1 running sandbox and 1 sandbox paused to disk");
  store.sandboxes.insert(sandbox("ic", { state: "starting" }));
  store.sandboxes.update(sandbox("ic", { state: "paused" }));
  const t = store.templates.get(tpl)!;
  store.snapshots.insert({ id: "snap1", teamID: DEFAULT_TEAM_ID, name: "mine:default", sourceSandboxID: "ia", templateID: tpl, buildID: t.buildID, image: "s1", template: t, sizeBytes: 1, createdAt: "2026-01-01T00:00:00.000Z" });
  store.snapshots.insert({ id: "snap2", teamID: DEFAULT_TEAM_ID, name: null, sourceSandboxID: "ia", templateID: tpl, buildID: t.buildID, image: "s2", template: t, sizeBytes: 1, createdAt: "2026-01-01T00:00:00.000Z" });
  assert.equal(templateHolders(store, tpl), "1 running sandbox, 1 paused sandbox, 1 sandbox paused to disk and 2 snapshots");
  assert.match(snapshotNameClash(store, DEFAULT_TEAM_ID, "mine")!, /^the name 'mine' is a snapshot's/);
  assert.equal(snapshotNameClash(store, DEFAULT_TEAM_ID, "other"), undefined);
  assert.equal(snapshotNameClash(store, "another-team", "mine"), undefined, "names are per team");
});

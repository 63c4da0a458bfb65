import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createJsonLogger } from "../../../src/common/log.js";
import { createRowMirror } from "../../../src/sandboxd/sandboxes/index.js";
import type { ListQuery } from "../../../src/sandboxd/sandboxes/inputs.js";
import { decodeCursor, matchesMetadata, page, sortRows } from "../../../src/sandboxd/sandboxes/list.js";
import { createSandboxService, type SandboxService } from "../../../src/sandboxd/sandboxes/service.js";
import { listedBody } from "../../../src/sandboxd/sandboxes/views.js";
import { DEFAULT_TEAM_ID, registerBaseTemplate, seed } from "../../../src/sandboxd/store/seed.js";
import type { SandboxRow } from "../../../src/sandboxd/store/sandboxes.js";
import { openStore, type Store } from "../../../src/sandboxd/store/store.js";
import { FakeRuntime, fakeEnvd } from "../helpers/fake-runtime.js";
import { ManualClock } from "../helpers/manual-clock.js";

const log = createJsonLogger({ level: "silent", fd: 2, name: "test" });
const TEAM = DEFAULT_TEAM_ID;

/** The v2 list as read straight from the store's rows (every row read, parsed and sorted). */
function fromStore(store: Store, q: ListQuery): { items: unknown[]; nextToken?: string; totalRunning?: number } {
  let rows = store.sandboxes.listByTeam(TEAM).filter((r) => r.state !== "starting" && q.states.includes(r.state) && matchesMetadata(r, q.metadata));
  if (q.startedAfter !== undefined) rows = rows.filter((r) => Date.parse(r.startedAt) >= q.startedAfter!);
  if (q.template !== undefined) {
    const tpl = store.templates.get(q.template) ?? store.templates.byAlias(q.template);
    rows = tpl && tpl.teamID === TEAM ? rows.filter((r) => r.templateID === tpl.id) : [];
  }
  const totalRunning = q.states.includes("running") ? rows.filter((r) => r.state === "running").length : undefined;
  const { items, next } = page(sortRows(rows, q.order), q.order, q.limit, q.nextToken ? decodeCursor(q.nextToken, q.order) : undefined);
  return { items: items.map((r) => listedBody(r, store.templates.get(r.templateID))), nextToken: next, totalRunning };
}

describe("the lists read the rows from memory and answer exactly as the store's rows do", () => {
  let dir: string;
  let store: Store;
  let svc: SandboxService;
  let clock: ManualClock;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "list-memory-"));
    store = openStore(join(dir, "sandboxd.db"));
    seed(store);
    store.teams.update(TEAM, { maxConcurrent: 1000 });
    const templateID = registerBaseTemplate(store, { rootfs: join(dir, "rootfs"), envdVersion: "0.6.13" });
    clock = new ManualClock();
    svc = createSandboxService({ store, runtime: new FakeRuntime(), log, clock, envd: fakeEnvd().connect, defaultTemplateID: templateID, budget: { host: {}, team: {}, maxSandboxMemoryMB: 8192 } });
  });
  after(async () => {
    await svc.close();
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("through creates, pauses (in memory and to disk), timeout changes and kills, every page and filter agrees", async () => {
    const ids: string[] = [];
    const compareAll = () => {
      const queries: Partial<ListQuery>[] = [
        {}, { order: "asc" }, { limit: 3 }, { limit: 3, order: "asc" }, { states: ["paused"] }, { states: ["running"] },
        { metadata: [["group", "g1"]] }, { metadata: [["group", "g0"], ["odd", "yes"]] }, { template: "base" }, { template: "nope" },
        { startedAfter: clock.now() - 1500 },
      ];
      for (const part of queries) {
        const q: ListQuery = { states: ["running", "paused"], metadata: [], order: "desc", limit: 100, ...part };
        // walk every page of the query both ways
        for (let guard = 0; guard < 100; guard++) {
          const mem = svc.listV2(TEAM, q);
          assert.deepEqual(JSON.stringify(mem), JSON.stringify(fromStore(store, q)), JSON.stringify(q));
          if (!mem.nextToken) break;
          q.nextToken = mem.nextToken;
        }
      }
      const v1 = store.sandboxes.listByTeam(TEAM).filter((r) => r.state === "running");
      assert.deepEqual(JSON.stringify(svc.listV1(TEAM, [])), JSON.stringify(sortRows(v1, "desc").map((r) => listedBody(r, store.templates.get(r.templateID)))));
    };
    compareAll();
    for (let i = 0; i < 24; i++) {
      // three at each instant: equal starts are ordered by ID
      if (i % 3 === 0) await clock.advance(1000);
      const body = await svc.create(TEAM, { templateID: "base", timeout: 300, secure: i % 2 === 0, metadata: i % 5 === 0 ? {} : { group: `g${i % 3}`, ...(i % 2 ? { odd: "yes" } : {}) } });
      ids.push(body.sandboxID as string);
    }
    compareAll();
    await svc.pause(TEAM, ids[1]);
    await svc.pause(TEAM, ids[4], false);
    await svc.setTimeout(TEAM, ids[7], 60);
    await svc.kill(TEAM, ids[10]);
    await svc.kill(TEAM, ids[11]);
    compareAll();
    await svc.resume(TEAM, ids[1], 300);
    for (const id of ids.slice(12)) await svc.kill(TEAM, id);
    compareAll();
    for (const id of [...ids.slice(0, 10), ids[1]].filter((id, i, all) => all.indexOf(id) === i)) await svc.kill(TEAM, id);
    assert.deepEqual(svc.listV2(TEAM, { states: ["running", "paused"], metadata: [], order: "desc", limit: 100 }), { items: [], nextToken: undefined, totalRunning: 0 });
  });
});

describe("the row mirror", () => {
  test("reads nothing before its first list, re-reads touched rows at the next, and past 1,024 touches between lists reads everything again", () => {
    const rows = new Map<string, SandboxRow>();
    const reads = { one: 0, all: 0 };
    const source = { get: (id: string) => (reads.one++, rows.get(id) && { ...rows.get(id)! }), all: () => (reads.all++, [...rows.values()].map((r) => ({ ...r }))) };
    const mk = (i: number): SandboxRow => ({
      id: `s${String(i).padStart(5, "0")}`, teamID: i % 2 ? "a" : "b", templateID: "x", state: "running", startedAt: new Date(1e12 + (i % 7) * 1000).toISOString(), endAt: "", metadata: {},
      autoPause: false, secure: false, trafficToken: null, network: {}, allowInternetAccess: true, ip: null, envdPort: null, envdVersion: "0.6.13", cpuCount: 1, memoryMB: 1, diskSizeMB: 1,
    });
    const m = createRowMirror(source);
    for (let i = 0; i < 10; i++) {
      rows.set(mk(i).id, mk(i));
      m.touch(mk(i).id);
    }
    assert.deepEqual(reads, { one: 0, all: 0 });
    const expect = (team: string) => sortRows([...rows.values()].filter((r) => r.teamID === team), "desc").map((r) => r.id);
    assert.deepEqual(m.sorted("a").map((e) => e.row.id), expect("a"));
    assert.deepEqual(reads, { one: 0, all: 1 });
    rows.delete(mk(1).id);
    m.touch(mk(1).id);
    rows.set(mk(3).id, { ...mk(3), teamID: "b" });
    m.touch(mk(3).id);
    assert.deepEqual(m.sorted("a").map((e) => e.row.id), expect("a"));
    assert.deepEqual(m.sorted("b").map((e) => e.row.id), expect("b"));
    assert.deepEqual(reads, { one: 2, all: 1 });
    for (let i = 10; i < 2000; i++) {
      rows.set(mk(i).id, mk(i));
      m.touch(mk(i).id);
    }
    assert.deepEqual(m.sorted("b").map((e) => e.row.id), expect("b"));
    assert.deepEqual(reads, { one: 2, all: 2 }, "read whole again, not row by row");
    assert.equal(m.size(), rows.size);
  });
});

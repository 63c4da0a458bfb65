import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig } from "../../../src/sandboxd/config.js";
import { stepFor } from "../../../src/sandboxd/metrics/range.js";
import { teamMax, teamRange, teamSeries } from "../../../src/sandboxd/metrics/team-query.js";
import { createTeamSampler, type TeamSampler } from "../../../src/sandboxd/metrics/team-sampler.js";
import { statusOf } from "../../../src/sandboxd/api/errors.js";
import { createLogger } from "../../../src/sandboxd/log.js";
import { openStore, type Store } from "../../../src/sandboxd/store/store.js";

/** A time divisible by 900 s, so every step's buckets start at T0. */
const T0 = 1_700_000_100;
const DAY = 86400;

/** A store with teams "a" and "b", a sampler on a clock the test moves, and a way to set each team's live sandboxes. */
function fixture(dir: string, name: string, retentionS = 7 * DAY) {
  const store = openStore(join(dir, `${name}.db`));
  for (const id of ["a", "b"]) store.teams.insert({ id, name: id, maxConcurrent: 100, maxLengthHours: 24 });
  let now = T0 * 1000;
  const sampler = createTeamSampler({ store, log: createLogger("silent"), retentionS, clock: () => now });
  const rows = new Map<string, string[]>();
  const live = (team: string, n: number) => {
    const ids = rows.get(team) ?? [];
    while (ids.length > n) store.sandboxes.delete(ids.pop()!);
    while (ids.length < n) {
      const id = `${team}${ids.length}x${Math.random().toString(36).slice(2, 8)}`;
      store.sandboxes.insert({
        id, teamID: team, templateID: "t", state: "running", startedAt: "", endAt: "", metadata: {}, autoPause: false, secure: false, trafficToken: null,
        network: {}, allowInternetAccess: true, ip: null, envdPort: null, envdVersion: "0.1.0", cpuCount: 1, memoryMB: 128, diskSizeMB: 1,
      });
      ids.push(id);
    }
    rows.set(team, ids);
  };
  /** Moves the clock to T0 + s seconds and takes a sample. */
  const tickAt = (s: number) => {
    now = (T0 + s) * 1000;
    sampler.tick();
  };
  const setNow = (s: number) => (now = (T0 + s) * 1000);
  return { store, sampler, live, tickAt, setNow, nowS: () => Math.floor(now / 1000) };
}

const q = (o: Record<string, string | number>) => new URLSearchParams(Object.entries(o).map(([k, v]) => [k, String(v)]));

/** The 400 message a function throws (fails if it does not). */
function err400(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.equal(statusOf(err), 400, `expected an error answered with 400, got ${err}`);
    return (err as Error).message;
  }
  assert.fail("expected a 400");
}

describe("team metrics: buckets over synthetic timelines (real SQLite, injected clock)", () => {
  let dir: string;
  before(() => (dir = mkdtempSync(join(tmpdir(), "sandboxd-metrics-"))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("--metrics-retention-days: default 7, 1..366 whole days, anything else refused", () => {
    const parse = (v?: string) => parseConfig(["serve", ...(v === undefined ? [] : ["--metrics-retention-days", v])], {}, "0.0.0");
    const days = (v?: string) => {
      const r = parse(v);
      return "config" in r ? r.config.metricsRetentionDays : undefined;
    };
    assert.equal(days(), 7);
    assert.equal(days("30"), 30);
    assert.equal(days("366"), 366);
    for (const bad of ["0", "367", "7.5", "abc", "=1"]) {
      const r = parse(bad);
      assert.ok("print" in r && r.exitCode === 2, bad);
      assert.match("print" in r ? r.print : "", /--metrics-retention-days must be a whole number of days from 1 to 366/);
    }
  });

  test("the step follows the range's length, as E2B's table", () => {
    const cases: [number, number][] = [[0, 5], [3599, 5], [3600, 30], [6 * 3600 - 1, 30], [6 * 3600, 60], [12 * 3600, 120], [DAY - 1, 120], [DAY, 300], [7 * DAY - 1, 300], [7 * DAY, 900], [30 * DAY, 900]];
    for (const [len, step] of cases) assert.equal(stepFor(len), step, `range ${len} s`);
  });

  test("5 s buckets: gauge max, starts ÷ step, a drop to 0 written once, only buckets with data, every field", () => {
    const f = fixture(dir, "series");
    f.live("a", 2);
    f.sampler.started("a");
    f.sampler.started("a");
    f.tickAt(0);
    f.live("a", 3);
    f.sampler.started("a");
    f.live("b", 1);
    f.sampler.started("b");
    f.tickAt(5);
    f.live("a", 1);
    f.live("b", 0);
    f.tickAt(10);
    f.live("a", 0);
    f.tickAt(15);
    f.tickAt(20);
    f.tickAt(25);
    const items = teamSeries(f.store.teamMetrics, "a", teamRange(q({ start: T0, end: T0 + 600 }), f.nowS()));
    assert.deepEqual(items, [
      { timestamp: new Date(T0 * 1000).toISOString(), timestampUnix: T0, concurrentSandboxes: 2, sandboxStartRate: 0.4 },
      { timestamp: new Date((T0 + 5) * 1000).toISOString(), timestampUnix: T0 + 5, concurrentSandboxes: 3, sandboxStartRate: 0.2 },
      { timestamp: new Date((T0 + 10) * 1000).toISOString(), timestampUnix: T0 + 10, concurrentSandboxes: 1, sandboxStartRate: 0 },
      { timestamp: new Date((T0 + 15) * 1000).toISOString(), timestampUnix: T0 + 15, concurrentSandboxes: 0, sandboxStartRate: 0 },
    ]);
    const b = teamSeries(f.store.teamMetrics, "b", teamRange(q({ start: T0, end: T0 + 600 }), f.nowS()));
    assert.deepEqual(b.map((i) => [i.timestampUnix, i.concurrentSandboxes, i.sandboxStartRate]), [[T0 + 5, 1, 0.2], [T0 + 10, 0, 0]]);
    // A range that starts after the data has no buckets.
    assert.deepEqual(teamSeries(f.store.teamMetrics, "a", teamRange(q({ start: T0 + 16, end: T0 + 600 }), f.nowS())), []);

    // Two hours → 30 s buckets: one bucket at T0 with the max and 3 starts / 30 s.
    const wide = teamSeries(f.store.teamMetrics, "a", teamRange(q({ start: T0, end: T0 + 7200 }), f.nowS()));
    assert.deepEqual(wide.map((i) => [i.timestampUnix, i.concurrentSandboxes, i.sandboxStartRate]), [[T0, 3, 0.1]]);

    // No start or end: the last 7 days to now → 15-minute buckets.
    f.setNow(1000);
    const def = teamSeries(f.store.teamMetrics, "a", teamRange(new URLSearchParams(), f.nowS()));
    assert.deepEqual(def.map((i) => [i.timestampUnix, i.concurrentSandboxes, i.sandboxStartRate]), [[T0, 3, 3 / 900]]);
    f.store.close();
  });

  test("/max: the highest gauge sample and the busiest start bucket, earliest on a tie; 0 when empty", () => {
    const f = fixture(dir, "max");
    for (const [s, n, starts] of [[0, 1, 1], [5, 4, 0], [10, 4, 3], [15, 2, 3]] as const) {
      f.live("a", n);
      for (let i = 0; i < starts; i++) f.sampler.started("a");
      f.tickAt(s);
    }
    const range = teamRange(q({ start: T0, end: T0 + 60 }), f.nowS());
    assert.deepEqual(teamMax(f.store.teamMetrics, "a", range, "concurrent_sandboxes"), { timestamp: new Date((T0 + 5) * 1000).toISOString(), timestampUnix: T0 + 5, value: 4 });
    assert.deepEqual(teamMax(f.store.teamMetrics, "a", range, "sandbox_start_rate"), { timestamp: new Date((T0 + 10) * 1000).toISOString(), timestampUnix: T0 + 10, value: 0.6 });
    assert.deepEqual(teamMax(f.store.teamMetrics, "b", range, "concurrent_sandboxes"), { timestamp: new Date(T0 * 1000).toISOString(), timestampUnix: T0, value: 0 });
    assert.match(err400(() => teamMax(f.store.teamMetrics, "a", range, null)), /"metric" is required/);
    assert.match(err400(() => teamMax(f.store.teamMetrics, "a", range, "cpu")), /must be one of concurrent_sandboxes, sandbox_start_rate/);
    f.store.close();
  });

  test("bad ranges are 400s with a message: start after end, non-numeric, negative, huge, too long", () => {
    const now = T0;
    assert.match(err400(() => teamRange(q({ start: T0 + 10, end: T0 }), now)), /start \(\d+\) cannot be after end/);
    for (const bad of ["abc", "-5", "1e9", "12.5", "", "99999999999999", "0x10"]) {
      assert.match(err400(() => teamRange(q({ start: bad }), now)), /"start" must be a unix time in seconds/, `start=${bad}`);
      assert.match(err400(() => teamRange(q({ end: bad }), now)), /"end" must be a unix time in seconds/, `end=${bad}`);
    }
    assert.match(err400(() => teamRange(q({ start: 0, end: T0 }), now)), /can be at most 31 days/);
    assert.deepEqual(teamRange(q({ end: T0 }), now), { start: T0 - 7 * DAY, end: T0 });
    assert.deepEqual(teamRange(q({ start: 5 }), 100), { start: 5, end: 100 });
  });

  test("compaction folds raw rows older than a day into 5-minute rows (max and starts kept); retention drops old rows", () => {
    const f = fixture(dir, "compact", 7 * DAY);
    // Two days of 5 s samples: the gauge is 1, and 9 once every 5 minutes; one start every 10 s.
    // The sampler compacts by itself every 10 minutes of its clock.
    const oldRange = { start: T0, end: T0 + 3599 };
    for (let s = 0; s < 2 * DAY; s += 5) {
      f.live("a", (s / 5) % 60 === 30 ? 9 : 1);
      if (s % 10 === 0) f.sampler.started("a");
      f.tickAt(s);
      if (s === 3600) assert.equal(teamSeries(f.store.teamMetrics, "a", oldRange).length, 720, "the first hour is at 5 s while it is recent");
    }
    const ticks = (2 * DAY) / 5;
    const afterCount = f.store.teamMetrics.count();
    // At most: the last day raw, 10 minutes not yet folded, and one row per 5 minutes before.
    const bound = DAY / 5 + 600 / 5 + (2 * DAY) / 300;
    assert.ok(afterCount <= bound && afterCount < ticks * 0.52, `${ticks} ticks kept as ${afterCount} rows (bound ${bound})`);
    f.setNow(2 * DAY);
    f.sampler.maintain();
    // The first hour, now 5-minute rows: 12 buckets, each with the 5-minute max (9) and 30 starts / 300 s.
    const folded = teamSeries(f.store.teamMetrics, "a", oldRange);
    assert.equal(folded.length, 12);
    for (const [i, item] of folded.entries()) {
      assert.equal(item.timestampUnix, T0 + i * 300);
      assert.equal(item.concurrentSandboxes, 9);
      assert.equal(item.sandboxStartRate, 30 / 300);
    }
    // The last day is still at 5 s.
    assert.equal(teamSeries(f.store.teamMetrics, "a", { start: T0 + 2 * DAY - 600, end: T0 + 2 * DAY }).length, 120);
    // The first day's starts are all still counted (one per 10 s): under a day → 2-minute buckets, each a 5-minute row ÷ 300 s.
    const day1 = teamSeries(f.store.teamMetrics, "a", { start: T0, end: T0 + DAY - 1 });
    assert.equal(day1.length, 288);
    assert.equal(Math.round(day1.reduce((n, i) => n + i.sandboxStartRate * 300, 0)), 8640);

    // Retention (7 days): at T0 + 8 days + 1 h everything before T0 + 1 day + 1 h goes.
    f.setNow(8 * DAY + 3600);
    f.sampler.maintain();
    assert.deepEqual(teamSeries(f.store.teamMetrics, "a", { start: T0, end: T0 + DAY + 3599 }), []);
    const kept = teamSeries(f.store.teamMetrics, "a", { start: T0 + DAY + 3600, end: T0 + 2 * DAY });
    assert.ok(kept.length > 0);
    assert.ok(f.store.teamMetrics.count() < afterCount);
    f.store.close();
  });
});

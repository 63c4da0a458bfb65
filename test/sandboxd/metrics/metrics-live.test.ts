import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { api } from "../helpers/api-client.js";
import { runSdk } from "../helpers/sdk-run.js";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";

/** Polls `fn` every 500 ms until it returns a value, or fails after `ms` with the last reason. */
async function eventually<T>(what: string, ms: number, fn: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

describe("metrics with real sandboxes: team series, envd polling, Prometheus text", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  let id: string;

  before(async () => {
    s = await startSandboxd({ args: ["--network-cidr", "198.19.230.0/24"] });
    ca = readFileSync(s.caFile);
  });
  after(async () => {
    if (id) spawnSync("runc", ["--root", join(s.dataDir, "runc"), "resume", id]);
    await s?.stop();
  });

  test("the SDK's getMetrics returns envd's readings polled every 5 s; GET /sandboxes/metrics has the latest", async () => {
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create({ timeoutMs: 300_000 });
      await sbx.commands.run("head -c 20000000 /dev/urandom | sha256sum");
      let m = [];
      for (let i = 0; i < 60 && m.length < 2; i++) {
        await new Promise((r) => setTimeout(r, 1000));
        m = await sbx.getMetrics();
      }
      const again = await Sandbox.getMetrics(sbx.sandboxId, { start: new Date(Date.now() + 3600_000) }).catch((e) => e.name + ": " + e.message);
      console.log(JSON.stringify({ id: sbx.sandboxId, m, again }));
    `);
    id = got.id;
    assert.ok(got.m.length >= 2, `metrics: ${JSON.stringify(got.m)}`);
    for (const item of got.m) {
      assert.ok(item.cpuCount >= 1);
      assert.ok(item.cpuUsedPct >= 0 && item.cpuUsedPct <= 100);
      assert.ok(item.memTotal > 0 && item.memUsed > 0 && item.memUsed <= item.memTotal);
      // the sandbox's own limit (base: 512 MiB), not the machine's memory
      assert.equal(item.memTotal, 512 * 2 ** 20);
      assert.ok(item.memCache >= 0);
      assert.ok(item.diskTotal > 0 && item.diskUsed > 0 && item.diskUsed <= item.diskTotal);
      assert.ok(!Number.isNaN(Date.parse(item.timestamp)));
    }
    const ts = got.m.map((i: { timestamp: string }) => Date.parse(i.timestamp));
    assert.deepEqual([...ts].sort((a, b) => a - b), ts, "ascending");
    assert.ok(ts[1] - ts[0] >= 4000, `polled every 5 s, not faster: ${ts}`);
    // A start after now is after the default end (now): a 400 the SDK passes on.
    assert.match(String(got.again), /400: start \(\d+\) cannot be after end/);

    const raw = await api(s, ca, "GET", `/sandboxes/${id}/metrics`);
    assert.equal(raw.status, 200);
    assert.deepEqual(Object.keys(raw.json[0]).sort(), ["cpuCount", "cpuUsedPct", "diskTotal", "diskUsed", "memCache", "memTotal", "memUsed", "timestamp", "timestampUnix"]);
    assert.equal(raw.json[0].timestampUnix, Date.parse(raw.json[0].timestamp) / 1000);

    const many = await api(s, ca, "GET", `/sandboxes/metrics?sandbox_ids=${id},inothere00000000000000`);
    assert.equal(many.status, 200);
    assert.deepEqual(Object.keys(many.json.sandboxes), [id]);
    assert.ok(many.json.sandboxes[id].memTotal > 0);
    const none = await api(s, ca, "GET", "/sandboxes/metrics");
    assert.equal(none.status, 400);
    assert.match(none.json.message, /"sandbox_ids" is required/);
    const unknown = await api(s, ca, "GET", "/sandboxes/inothere00000000000000/metrics");
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.message, `Sandbox "inothere00000000000000" doesn't exist or you don't have access to it`);
    const bad = await api(s, ca, "GET", `/sandboxes/${id}/metrics?start=yesterday`);
    assert.equal(bad.status, 400);
    assert.match(bad.json.message, /"start" must be a unix time in seconds/);
  });

  test("team metrics count the live sandbox and its start; /max; 403 for another team; bad params are 400 JSON", async () => {
    const series = await eventually("a team bucket with the sandbox", 30_000, async () => {
      const r = await api(s, ca, "GET", "/teams/default/metrics");
      assert.equal(r.status, 200);
      const items = r.json as { concurrentSandboxes: number; sandboxStartRate: number }[];
      return items.some((i) => i.concurrentSandboxes >= 1) && items.some((i) => i.sandboxStartRate > 0) ? items : undefined;
    });
    for (const i of series as any[]) {
      assert.deepEqual(Object.keys(i).sort(), ["concurrentSandboxes", "sandboxStartRate", "timestamp", "timestampUnix"]);
      assert.equal(Date.parse(i.timestamp) / 1000, i.timestampUnix);
      assert.equal(i.timestampUnix % 900, 0, "the default 7-day range has 15-minute buckets");
    }
    const now = Math.floor(Date.now() / 1000);
    const recent = await api(s, ca, "GET", `/teams/default/metrics?start=${now - 600}&end=${now + 5}`);
    assert.equal(recent.status, 200);
    assert.ok(recent.json.length >= 1 && recent.json.every((i: any) => i.timestampUnix % 5 === 0));
    const ts = recent.json.map((i: any) => i.timestampUnix);
    assert.deepEqual([...ts].sort((a: number, b: number) => a - b), ts);

    const max = await api(s, ca, "GET", "/teams/default/metrics/max?metric=concurrent_sandboxes");
    assert.equal(max.status, 200);
    assert.ok(max.json.value >= 1);
    assert.deepEqual(Object.keys(max.json).sort(), ["timestamp", "timestampUnix", "value"]);
    const rate = await api(s, ca, "GET", "/teams/default/metrics/max?metric=sandbox_start_rate");
    assert.ok(rate.json.value > 0);

    const other = await api(s, ca, "GET", "/teams/someoneelse/metrics");
    assert.equal(other.status, 403);
    assert.equal(other.json.message, "You (default) are not authorized to access this team's (someoneelse) metrics");
    assert.equal((await api(s, ca, "GET", "/teams/someoneelse/metrics/max?metric=concurrent_sandboxes")).status, 403);
    for (const [q, msg] of [
      ["start=10&end=5", /start \(10\) cannot be after end \(5\)/],
      ["start=abc", /"start" must be a unix time/],
      ["end=1e12", /"end" must be a unix time/],
      ["start=0", /at most 31 days/],
    ] as const) {
      const r = await api(s, ca, "GET", `/teams/default/metrics?${q}`);
      assert.equal(r.status, 400, q);
      assert.equal(r.json.code, 400);
      assert.match(r.json.message, msg);
    }
    const noMetric = await api(s, ca, "GET", "/teams/default/metrics/max");
    assert.equal(noMetric.status, 400);
    assert.equal((await api(s, ca, "GET", "/teams/default/metrics", { key: null })).status, 401);
  });

  test("Prometheus text behind the API key; a sandbox whose envd stops answering is marked, and unmarked when it answers again", async () => {
    assert.equal((await api(s, ca, "GET", "/metrics", { key: null })).status, 401);
    const text = async () => {
      const r = await api(s, ca, "GET", "/metrics");
      assert.equal(r.status, 200);
      assert.match(String(r.headers["content-type"]), /^text\/plain; version=0\.0\.4/);
      return r.body;
    };
    const first = await text();
    assert.match(first, /^sandboxd_up 1$/m);
    assert.match(first, /^sandboxd_team_sandboxes\{team_id="default",state="running"\} 1$/m);
    assert.match(first, /^sandboxd_team_sandboxes_started_total\{team_id="default"\} 1$/m);
    assert.match(first, new RegExp(`^sandboxd_sandbox_memory_total_bytes\\{sandbox_id="${id}"\\} [1-9]\\d*$`, "m"));
    assert.match(first, new RegExp(`^sandboxd_sandbox_envd_up\\{sandbox_id="${id}"\\} 1$`, "m"));
    assert.doesNotMatch(first, new RegExp(s.apiKey));

    // Freeze the container behind sandboxd's back: envd stops answering, sandboxd still thinks it runs.
    const runc = (verb: string) => spawnSync("runc", ["--root", join(s.dataDir, "runc"), verb, id], { encoding: "utf8" });
    assert.equal(runc("pause").status, 0);
    try {
      await eventually("envd marked down", 30_000, async () => (new RegExp(`^sandboxd_sandbox_envd_up\\{sandbox_id="${id}"\\} 0$`, "m").test(await text()) ? true : undefined));
      // The API keeps answering while the poller waits on the frozen envd.
      const t0 = Date.now();
      assert.equal((await api(s, ca, "GET", `/sandboxes/metrics?sandbox_ids=${id}`)).status, 200);
      assert.ok(Date.now() - t0 < 2500, "the API does not wait on a poll");
      assert.match(s.logs(), /envd does not answer \/metrics; the sandbox is marked unresponsive/);
    } finally {
      runc("resume");
    }
    await eventually("envd marked up again", 30_000, async () => (new RegExp(`^sandboxd_sandbox_envd_up\\{sandbox_id="${id}"\\} 1$`, "m").test(await text()) ? true : undefined));
    assert.ok(/^sandboxd_envd_poll_failures_total [1-9]/m.test(await text()));
  });
});

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { api } from "../helpers/api-client.js";
import { h1, h2, h2session, memKiB, sandboxdPid, sandboxHost } from "../helpers/hostile.js";
import { ROOT, sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/sdk-run.js";
import { waitForBuild } from "../helpers/templates.js";

const CONTROL = 8099;
const ENVD = 49983;
/** What an attack may add to sandboxd's peak RSS: generous, and far below what an unbounded read takes. */
const RSS_BOUND_KIB = 64 * 1024;

/** Waits for `probe` to give a value (polling an event we cannot subscribe to), failing after `ms`. */
async function eventually<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe("a sandbox's root replaces envd: its answers cost sandboxd bounded memory and time", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  let pid = 0;
  let victim = "";
  let bystander = "";

  const stats = async (): Promise<{ metrics: number; init: number; start: number; h2: number; sent_init: number }> => {
    const r = await h1(s, ca, sandboxHost(s, ENVD, victim), "/fake-stats");
    assert.ok(!("error" in r) && r.status === 200, JSON.stringify(r));
    return JSON.parse(r.body);
  };

  /** sandboxd is alive, answers /health, never reached its last-resort handler, and another sandbox answers a command. */
  const stillServing = async (after: string) => {
    const health = await api(s, ca, "GET", "/health", { key: null });
    assert.equal(health.status, 200, `/health after ${after}`);
    assert.doesNotMatch(s.logs(), /last-resort/, `last-resort handler reached by ${after}`);
    const out = await runSdk(s, `
      import { Sandbox } from "e2b";
      const b = await Sandbox.connect(${JSON.stringify(bystander)});
      console.log(JSON.stringify((await b.commands.run("echo still here")).stdout));
    `);
    assert.equal(out, "still here\n", after);
  };

  before(async () => {
    s = await startSandboxd();
    ca = readFileSync(s.caFile);
    pid = sandboxdPid(s);
    const fake = readFileSync(join(ROOT, "test/sandboxd/fixtures/fake_envd.py"), "utf8");
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const c = await Sandbox.create({ timeoutMs: 1_200_000 });
      const b = await Sandbox.create({ timeoutMs: 1_200_000 });
      await c.files.write("/tmp/fake_envd.py", ${JSON.stringify(fake)});
      // Root in the sandbox (sudo, as any template's user may), in its own session, trickling
      // /metrics from the start; the FIFO is in the home directory (root may not open a FIFO of
      // another user's in sticky /tmp).
      const r = await c.commands.run("rm -f ~/fake.ready; mkfifo ~/fake.ready; sudo sh -c 'setsid python3 -u /tmp/fake_envd.py ${CONTROL} ${ENVD} trickle > /home/user/fake.ready 2>/dev/null < /dev/null &'; head -n1 ~/fake.ready");
      if (!r.stdout.includes("listening")) throw new Error("the fake envd did not start: " + r.stdout + r.stderr);
      console.log(JSON.stringify({ c: c.sandboxId, b: b.sandboxId }));
    `);
    victim = got.c;
    bystander = got.b;
    // Known up before the take-over, so that "marked down" below is the trickle's doing.
    await eventually("envd polled up", 30_000, async () => (new RegExp(`^sandboxd_sandbox_envd_up\\{sandbox_id="${victim}"\\} 1$`, "m").test((await api(s, ca, "GET", "/metrics")).body) ? true : undefined));
    const taken = await h1(s, ca, sandboxHost(s, CONTROL, victim), "/go");
    assert.deepEqual("error" in taken ? taken : [taken.status, taken.body], [200, '{"taken":true}']);
  });
  after(async () => {
    const logs = s?.logs() ?? "";
    await s?.stop();
    assert.doesNotMatch(logs, /last-resort/);
  });

  test("HTTP/2 through the proxy to the fake envd's port: its :status 600 is a 502 on that stream, the process lives", async () => {
    const session = h2session(s, ca);
    const got = await h2(session, sandboxHost(s, ENVD, victim), "/health");
    session.close();
    assert.ok((await stats()).h2 >= 1, "the request reached the fake envd over h2c");
    assert.deepEqual(got, {
      status: 502,
      headers: (got as { headers: object }).headers,
      body: `{"sandboxId":"${victim}","message":"The sandbox's answer on this port could not be relayed","port":${ENVD},"code":502}`,
    });
    await stillServing("an h2c :status 600");
  });

  test("a /metrics answer that trickles: the poll is abandoned at its deadline and the sandbox marked unresponsive", async () => {
    await eventually("envd marked down", 40_000, async () => (new RegExp(`^sandboxd_sandbox_envd_up\\{sandbox_id="${victim}"\\} 0$`, "m").test((await api(s, ca, "GET", "/metrics")).body) ? true : undefined));
    assert.ok((await stats()).metrics >= 1);
    await stillServing("a trickling /metrics");
  });

  test("a /metrics answer without end: a bounded read, bounded memory", async () => {
    const peak = memKiB(pid, "VmHWM");
    const r = await h1(s, ca, sandboxHost(s, ENVD, victim), "/mode?metrics=flood");
    assert.ok(!("error" in r) && r.status === 200);
    const start = (await stats()).metrics;
    await eventually("two flooded polls", 40_000, async () => ((await stats()).metrics >= start + 2 ? true : undefined));
    const grown = memKiB(pid, "VmHWM") - peak;
    assert.ok(grown < RSS_BOUND_KIB, `sandboxd's peak RSS grew by ${grown} KiB`);
    await stillServing("an endless /metrics");
  });

  test("an /init answer without end at resume: read 4 KiB at most, the resume goes on, memory bounded", async () => {
    const peak = memKiB(pid, "VmHWM");
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const c = await Sandbox.connect(${JSON.stringify(victim)});
      await c.pause();
      const again = await Sandbox.connect(${JSON.stringify(victim)});
      console.log(JSON.stringify({ id: again.sandboxId }));
    `);
    assert.deepEqual(got, { id: victim });
    const info = await api(s, ca, "GET", `/sandboxes/${victim}`);
    assert.equal(info.json?.state, "running", info.body);
    const after = await stats();
    assert.ok(after.init >= 1, "resume called the fake envd's /init");
    // Read to its end, the body would be taken as fast as sandboxd reads (tens of MiB a second);
    // cut at 4 KiB, only what socket buffers hold leaves the fake.
    assert.ok(after.sent_init < 24 * 1024 * 1024, `sandboxd took ${after.sent_init} bytes of /init answers`);
    const grown = memKiB(pid, "VmHWM") - peak;
    assert.ok(grown < RSS_BOUND_KIB, `sandboxd's peak RSS grew by ${grown} KiB`);
    assert.match(s.logs(), /envd \/init after resume failed/);
    await stillServing("an endless /init");
  });

  test("a template's start command replaces envd: the ready check's endless stream fails that create alone, quickly, memory bounded", async () => {
    const fake = readFileSync(join(ROOT, "test/sandboxd/fixtures/fake_envd.py"));
    const dockerfile = `FROM e2bdev/base\nRUN echo ${fake.toString("base64")} | base64 -d > /opt/fake_envd.py\n`;
    const startCmd = `sudo sh -c 'setsid python3 -u /opt/fake_envd.py ${CONTROL} ${ENVD} flood now > /dev/null 2>&1 < /dev/null &'`;
    const created = await api(s, ca, "POST", "/templates", { body: { dockerfile, alias: "fake-envd", startCmd, readyCmd: "test -f /never-there" } });
    assert.equal(created.status, 202, created.body);
    const built = await waitForBuild(s, ca, created.json.templateID, created.json.buildID);
    assert.equal(built.last.status, "ready", JSON.stringify(built.last.reason));
    const peak = memKiB(pid, "VmHWM");
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const err = await Sandbox.create("fake-envd").then(() => undefined, (e) => e.message);
      console.log(JSON.stringify({ err }));
    `);
    const grown = memKiB(pid, "VmHWM") - peak;
    assert.ok(grown < RSS_BOUND_KIB, `sandboxd's peak RSS grew by ${grown} KiB (${got.err})`);
    assert.match(got.err ?? "", /the template's ready command could not be run: envd sent a message of 2147483647 bytes/);
    await stillServing("an endless start-command stream");
  });
});

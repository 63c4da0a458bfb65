import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCgroupParent } from "../../../src/sandboxd/runtime/runc-once.js";
import { api } from "../helpers/api-client.js";
import { cgroupDirsLike } from "../helpers/runtime.js";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { waitForBuild, type BuildStatus } from "../helpers/templates.js";

/** Polls a build until a log line matches (the step is running). */
async function waitForLog(s: Sandboxd, ca: Buffer, templateID: string, buildID: string, re: RegExp): Promise<void> {
  const deadline = Date.now() + 240_000;
  for (;;) {
    const st = (await api(s, ca, "GET", `/templates/${templateID}/builds/${buildID}/status`)).json as BuildStatus;
    if (st.logEntries.some((e) => re.test(e.message))) return;
    if (st.status === "ready" || st.status === "error" || Date.now() > deadline) throw new Error(`no log line ${re} (status ${st.status}): ${JSON.stringify(st.reason)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Requests a v3 build of `name` and starts it with `steps`. */
async function build(s: Sandboxd, ca: Buffer, name: string, steps: unknown[], force = false): Promise<{ templateID: string; buildID: string }> {
  const r = await api(s, ca, "POST", "/v3/templates", { body: { name, cpuCount: 1, memoryMB: 256 } });
  assert.equal(r.status, 202, r.body);
  const start = await api(s, ca, "POST", `/v2/templates/${r.json.templateID}/builds/${r.json.buildID}`, { body: { steps, force } });
  assert.equal(start.status, 202, start.body);
  return r.json;
}

/** Mount points below a directory. */
const mountsBelow = (dir: string) => readFileSync("/proc/self/mountinfo", "utf8").split("\n").filter((l) => l.split(" ")[4]?.startsWith(dir + "/"));

describe("template build faults", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd | undefined;
  let ca: Buffer;
  const dataDir = mkdtempSync(join(tmpdir(), "sandboxd-tpl-faults-"));
  chmodSync(dataDir, 0o755);
  const args = ["--network-cidr", "198.19.212.0/24"];

  before(async () => {
    s = await startSandboxd({ dataDir, args });
    ca = readFileSync(s.caFile);
  });
  after(async () => {
    await s?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    assert.deepEqual(cgroupDirsLike(runCgroupParent(dataDir)), [], "no build cgroup is left");
  });

  test("a newer build of a template cancels the one in progress", async () => {
    const a = await build(s!, ca, "tpl-conc", [{ type: "RUN", args: ["echo long-step-started; sleep 120"] }]);
    await waitForLog(s!, ca, a.templateID, a.buildID, /^long-step-started$/);
    const b = await build(s!, ca, "tpl-conc", [{ type: "RUN", args: ["echo b > /tmp/b"] }]);
    assert.equal(b.templateID, a.templateID);
    const ra = await waitForBuild(s!, ca, a.templateID, a.buildID);
    assert.equal(ra.last.status, "error");
    assert.match(ra.last.reason!.message, new RegExp(`cancelled by the newer build ${b.buildID}`));
    const rb = await waitForBuild(s!, ca, b.templateID, b.buildID);
    assert.equal(rb.last.status, "ready", JSON.stringify(rb.last.reason));
    const listed = (await api(s!, ca, "GET", "/templates")).json.find((t: { templateID: string }) => t.templateID === a.templateID);
    assert.equal(listed.buildID, b.buildID);
    assert.equal(listed.buildStatus, "ready");
  });

  test("force rebuilds every step: nothing comes from the cache and new layers are made", async () => {
    const steps = [{ type: "RUN", args: ["echo forced > /tmp/forced"] }, { type: "WORKDIR", args: ["/srv/forced"] }];
    const layersDir = join(dataDir, "templates", "layers");
    const first = await build(s!, ca, "tpl-force", steps);
    assert.equal((await waitForBuild(s!, ca, first.templateID, first.buildID)).last.status, "ready");
    const before = readdirSync(layersDir).length;
    const cachedRun = await build(s!, ca, "tpl-force", steps);
    const c = await waitForBuild(s!, ca, cachedRun.templateID, cachedRun.buildID);
    assert.equal(c.logs.filter((l) => l.message.startsWith("CACHED")).length, 3);
    const forced = await build(s!, ca, "tpl-force", steps, true);
    const f = await waitForBuild(s!, ca, forced.templateID, forced.buildID);
    assert.equal(f.last.status, "ready", JSON.stringify(f.last.reason));
    assert.deepEqual(f.logs.filter((l) => l.message.startsWith("CACHED")), []);
    assert.equal(readdirSync(layersDir).length, before + 2);
  });

  test("sandboxd killed (SIGKILL) during a build: after a restart the build is an error, nothing of it is left, and builds work again", async () => {
    const c = await build(s!, ca, "tpl-killed", [{ type: "RUN", args: ["echo killed-step-started; sleep 120"] }]);
    await waitForLog(s!, ca, c.templateID, c.buildID, /^killed-step-started$/);
    assert.equal(await s!.terminate("SIGKILL"), null);
    s = await startSandboxd({ dataDir, args });
    ca = readFileSync(s.caFile);
    const st = (await api(s, ca, "GET", `/templates/${c.templateID}/builds/${c.buildID}/status`)).json as BuildStatus;
    assert.equal(st.status, "error");
    assert.match(st.reason!.message, /interrupted: sandboxd stopped while it ran/);
    const listed = (await api(s, ca, "GET", "/templates")).json.find((t: { templateID: string }) => t.templateID === c.templateID);
    assert.equal(listed.buildStatus, "error");
    assert.deepEqual(mountsBelow(join(dataDir, "templates")), []);
    assert.deepEqual(readdirSync(join(dataDir, "templates", "layers")).filter((n) => n.startsWith(".tmp-")), []);
    assert.ok(!existsSync(join(dataDir, "templates", "builds", c.buildID)));
    const runc = spawnSync("runc", ["--root", join(dataDir, "runc-build"), "list", "-q"], { encoding: "utf8" });
    assert.equal(runc.stdout.trim(), "");

    const d = await build(s, ca, "tpl-killed", [{ type: "RUN", args: ["echo again > /tmp/again"] }]);
    const rd = await waitForBuild(s, ca, d.templateID, d.buildID);
    assert.equal(rd.last.status, "ready", JSON.stringify(rd.last.reason));
  });
});

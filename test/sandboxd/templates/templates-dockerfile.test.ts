import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { api } from "../helpers/api-client.js";
import { NODE, ROOT, sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk, waitForBuild } from "../helpers/templates.js";

const DOCKERFILE = [
  "FROM debian:bookworm",
  'ENV GREETING="hello world" MODE=test',
  "RUN mkdir -p /opt/app && echo built-by-run > /opt/app/marker && useradd -m -s /bin/bash builder && chown builder /opt/app",
  "WORKDIR /opt/app",
  'RUN echo "$GREETING" > greeting.txt && id -un > whoami.txt',
  "USER builder",
  "RUN id -un > /opt/app/builder-was-here",
  "",
].join("\n");

/** The layer directories of the data dir's cache. */
const layers = (s: Sandboxd) => readdirSync(join(s.dataDir, "templates", "layers")).filter((n) => !n.startsWith(".")).sort();

describe("templates from a v1 Dockerfile", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  const v1 = (body: unknown, key?: string | null) => api(s, ca, "POST", "/templates", { body, key });

  before(async () => {
    s = await startSandboxd({ args: ["--network-cidr", "198.19.210.0/24"] });
    ca = readFileSync(s.caFile);
  });
  after(async () => {
    await s?.stop();
  });

  test("bad requests get 4xx JSON errors and make no template", async () => {
    const cases: [unknown, number, RegExp][] = [
      [{}, 400, /"dockerfile" is required/],
      [{ dockerfile: "FROM debian:bookworm", cpuCount: 0 }, 400, /CPU count must be at least 1/],
      [{ dockerfile: "FROM debian:bookworm", cpuCount: 3 }, 400, /CPU count must be 1 or an even number/],
      [{ dockerfile: "FROM debian:bookworm", memoryMB: 64 }, 400, /memory must be at least 128 MiB/],
      [{ dockerfile: "FROM debian:bookworm", alias: "Bad Name!" }, 400, /invalid name/],
      [{ dockerfile: "FORM debian:bookworm\nRUN true" }, 400, /invalid Dockerfile: .*must have a FROM instruction/],
      [{ dockerfile: "RUN true\nFROM debian:bookworm" }, 400, /line 1: RUN cannot come before the first FROM/],
      [{ dockerfile: "FROM debian:bookworm\nFROBNICATE x" }, 400, /line 2: FROBNICATE is not a supported instruction/],
      [{ dockerfile: "FROM debian:bookworm AS a\nFROM a\nCOPY --from=1 /x /y" }, 400, /names stage 1, which is not an earlier stage/],
      [{ dockerfile: "FROM scratch\nRUN true" }, 400, /scratch is not supported/],
      [{ dockerfile: "FROM debian:bookworm\nCMD [\"unterminated" }, 400, /malformed JSON/],
      [{ dockerfile: "FROM debian:bookworm", alias: "base" }, 409, /built in/],
    ];
    for (const [body, status, message] of cases) {
      const r = await v1(body);
      assert.equal(r.status, status, `${JSON.stringify(body)} → ${r.body}`);
      assert.equal(r.json.code, status);
      assert.match(r.json.message, message);
    }
    const noKey = await v1({ dockerfile: "FROM debian:bookworm" }, null);
    assert.equal(noKey.status, 401);
    const list = await api(s, ca, "GET", "/templates");
    assert.deepEqual(list.json.map((t: { aliases: string[] }) => t.aliases[0]), ["base"]);
  });

  test("build → status while building → list fields → SDK sandbox sees files, env, user, workdir and the start command → cached rebuild", async () => {
    const created = await v1({ dockerfile: DOCKERFILE, alias: "tpl-docker", cpuCount: 2, memoryMB: 512, startCmd: "sleep 3; echo started > /tmp/started; sleep infinity", readyCmd: "test -f /tmp/started" });
    assert.equal(created.status, 202, created.body);
    const { templateID, buildID } = created.json;
    assert.match(templateID, /^[a-z0-9]{20}$/);
    assert.equal(created.json.aliases[0], "tpl-docker");
    const built = await waitForBuild(s, ca, templateID, buildID);
    assert.equal(built.last.status, "ready", JSON.stringify(built.last.reason));
    assert.ok(built.seen.has("building") || built.seen.has("waiting"), `the status was seen before it was ready: ${[...built.seen]}`);
    const messages = built.logs.map((l) => l.message);
    assert.ok(messages.some((m) => m.startsWith("[1/") && m.includes("ENV")), messages.join("\n"));
    assert.ok(built.logs.some((l) => l.step === "2" && l.message.startsWith("[2/6] RUN mkdir")), "log entries carry their step");
    const back = await api(s, ca, "GET", `/templates/${templateID}/builds/${buildID}/logs?direction=backward&limit=2`);
    assert.equal(back.status, 200, back.body);
    assert.equal(back.json.logs.length, 2);
    assert.match(back.json.logs[0].message, /^Build finished in/);
    const errorsOnly = await api(s, ca, "GET", `/templates/${templateID}/builds/${buildID}/logs?level=error`);
    assert.deepEqual(errorsOnly.json.logs, []);
    assert.equal((await api(s, ca, "GET", `/templates/${templateID}/builds/${buildID}/logs?direction=sideways`)).status, 400);
    const layersAfterFirst = layers(s);
    assert.ok(layersAfterFirst.length >= 4, `layers: ${layersAfterFirst}`);

    const listed = (await api(s, ca, "GET", "/templates")).json.find((t: { templateID: string }) => t.templateID === templateID);
    assert.equal(listed.buildStatus, "ready");
    assert.equal(listed.buildID, buildID);
    assert.equal(listed.buildCount, 1);
    assert.equal(listed.spawnCount, 0);
    assert.equal(listed.lastSpawnedAt, null);
    assert.equal(listed.cpuCount, 2);
    assert.equal(listed.memoryMB, 512);
    assert.deepEqual(listed.aliases, ["tpl-docker"]);
    assert.deepEqual(listed.names, ["default/tpl-docker"]);
    assert.match(listed.envdVersion, /^\d+\.\d+\.\d+$/);
    assert.match(listed.createdBy.id, /^[0-9a-f-]{36}$/);

    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create("tpl-docker");
      // create answers only once the ready command passes: the start command's file is there at once
      const r = await sbx.commands.run('id -un; pwd; echo "$GREETING|$MODE"; cat /opt/app/marker /opt/app/greeting.txt /opt/app/whoami.txt /opt/app/builder-was-here /tmp/started; pgrep -f "[s]leep infinity" >/dev/null && echo start-cmd-running');
      const root = await sbx.commands.run("id -un", { user: "root" });
      await sbx.kill();
      console.log(JSON.stringify({ out: r.stdout.trim().split("\\n"), root: root.stdout.trim() }));
    `);
    assert.deepEqual(got.out, ["builder", "/opt/app", "hello world|test", "built-by-run", "hello world", "root", "builder", "started", "start-cmd-running"]);
    assert.equal(got.root, "root");

    const after1 = (await api(s, ca, "GET", "/v2/templates")).json.find((t: { templateID: string }) => t.templateID === templateID);
    assert.equal(after1.spawnCount, 1);
    assert.ok(Date.parse(after1.lastSpawnedAt) > Date.parse(listed.createdAt));

    // the same Dockerfile again: every layer is served from the cache, none is made
    const again = await v1({ dockerfile: DOCKERFILE, alias: "tpl-docker", memoryMB: 512 });
    assert.equal(again.status, 202, again.body);
    assert.equal(again.json.templateID, templateID);
    const rebuilt = await waitForBuild(s, ca, templateID, again.json.buildID);
    assert.equal(rebuilt.last.status, "ready", JSON.stringify(rebuilt.last.reason));
    const cached = rebuilt.logs.filter((l) => l.message.startsWith("CACHED"));
    assert.ok(cached.length >= 4, rebuilt.logs.map((l) => l.message).join("\n"));
    assert.deepEqual(layers(s), layersAfterFirst);
    assert.ok(rebuilt.logs.some((l) => l.message.startsWith("CACHED finalize")), "the flattened rootfs is reused too");
    const listed2 = (await api(s, ca, "GET", "/templates")).json.find((t: { templateID: string }) => t.templateID === templateID);
    assert.equal(listed2.buildCount, 2);
    assert.equal(listed2.buildID, again.json.buildID);
  });

  test("a RUN that fails, an unknown base image and a COPY without files: build error with the step and its log, no ready template", async () => {
    const before = layers(s);
    const failing = await v1({ dockerfile: "FROM e2bdev/base\nRUN echo about-to-fail && exit 3\n", alias: "tpl-fails" });
    assert.equal(failing.status, 202, failing.body);
    const r = await waitForBuild(s, ca, failing.json.templateID, failing.json.buildID);
    assert.equal(r.last.status, "error");
    assert.equal(r.last.reason?.step, "1");
    assert.match(r.last.reason!.message, /step 1 failed: the command exited with code 3/);
    assert.ok(r.last.reason!.logEntries!.some((e) => e.message === "about-to-fail"), JSON.stringify(r.last.reason));
    const listed = (await api(s, ca, "GET", "/templates")).json.find((t: { templateID: string }) => t.templateID === failing.json.templateID);
    assert.equal(listed.buildStatus, "error");
    assert.equal(listed.buildID, "");
    // GET /templates/{id or alias}: the template with its builds, the failed one included
    const one = await api(s, ca, "GET", "/templates/tpl-fails");
    assert.equal(one.status, 200, one.body);
    assert.equal(one.json.templateID, failing.json.templateID);
    assert.deepEqual(one.json.builds.map((b: { buildID: string; status: string }) => [b.buildID, b.status]), [[failing.json.buildID, "error"]]);
    assert.equal((await api(s, ca, "GET", "/templates/no-such-template")).status, 404);
    const create = await api(s, ca, "POST", "/sandboxes", { body: { templateID: "tpl-fails" } });
    assert.equal(create.status, 400);
    assert.match(create.json.message, /no ready build/);
    // the failed step's layer is neither published nor left half-made
    assert.deepEqual(layers(s), before);
    assert.deepEqual(readdirSync(join(s.dataDir, "templates", "layers")).filter((n) => n.startsWith(".")), []);

    // a registry that cannot be reached (on loopback: no test sends a packet off the machine)
    const python = await v1({ dockerfile: "FROM 127.0.0.1:9/python:3.12\nRUN true\n", alias: "tpl-python" });
    const p = await waitForBuild(s, ca, python.json.templateID, python.json.buildID);
    assert.equal(p.last.status, "error");
    assert.equal(p.last.reason?.step, "base");
    assert.match(p.last.reason!.message, /pulling 127\.0\.0\.1:9\/python:3\.12: failed: .*connection refused/);

    const copy = await v1({ dockerfile: "FROM debian:bookworm\nCOPY app.py /app/\n", alias: "tpl-copy" });
    const c = await waitForBuild(s, ca, copy.json.templateID, copy.json.buildID);
    assert.equal(c.last.status, "error");
    assert.match(c.last.reason!.message, /COPY app.py: the Dockerfile API has no build context/);
  });

  test("the CLI: 'sandboxd template build' shows progress and the log, exits 1 on a failed build; 'template list' shows the table", () => {
    const dir = mkdtempSync(join(tmpdir(), "tpl-cli-"));
    try {
      writeFileSync(join(dir, "Dockerfile"), "FROM e2bdev/base\nRUN echo cli-build-output\n");
      writeFileSync(join(dir, "Broken"), "FROM e2bdev/base\nRUN echo going-down; false\n");
      const cli = (args: string[]) => spawnSync(NODE, [join(ROOT, "dist", "sandboxd"), "template", ...args], { encoding: "utf8", env: { ...process.env, ...s.sdkEnv }, timeout: 300_000 });
      const ok = cli(["build", "-f", join(dir, "Dockerfile"), "--name", "tpl-cli", "--memory", "256"]);
      assert.equal(ok.status, 0, ok.stdout + ok.stderr);
      assert.match(ok.stdout, /==> step 1 of 3: RUN echo cli-build-output/);
      assert.match(ok.stdout, /^ {4}cli-build-output$/m);
      assert.match(ok.stdout, /ready: start sandboxes with Sandbox.create\('tpl-cli'\)/);
      const bad = cli(["build", "-f", join(dir, "Broken"), "--name", "tpl-cli-broken"]);
      assert.equal(bad.status, 1, bad.stdout + bad.stderr);
      assert.match(bad.stdout, /going-down/);
      assert.match(bad.stdout, /build failed in step 1: step 1 failed: the command exited with code 1/);
      const usage = cli(["build", "--name", "x"]);
      assert.equal(usage.status, 1);
      assert.match(usage.stderr, /needs -f Dockerfile and --name NAME/);
      const list = cli(["list"]);
      assert.equal(list.status, 0, list.stderr);
      assert.match(list.stdout, /^TEMPLATE ID\s+NAME\s+STATUS/);
      assert.match(list.stdout, /\btpl-cli\s+ready\s+2\s+256 MiB\s+1\s+0\s+never/);
      assert.match(list.stdout, /\btpl-cli-broken\s+error\b/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

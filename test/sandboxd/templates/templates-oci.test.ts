import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cachedBaseRootfs } from "../../../src/sandboxd/images/base.js";
import { fixtureLayout } from "../helpers/oci-fixtures.js";
import { push, registrySkipReason, startRegistry, type Registry } from "../helpers/registry.js";
import { teamKey } from "../helpers/hostile-tar.js";
import { runSdk as runSdkIn } from "../helpers/sdk-run.js";
import { api } from "../helpers/api-client.js";
import { waitForBuild } from "../helpers/templates.js";
import { ROOT, sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";

/** Runs an SDK script (a build's time limit), optionally with another team's key. */
const runSdk = (s: Sandboxd, script: string, env?: Record<string, string>) => runSdkIn(s, script, { cwd: ROOT, timeoutMs: 540_000, env });

const CACHE_DIR = process.env.SANDBOXD_CACHE_DIR ?? "/var/cache/sandboxd";
const PRIVATE = { user: "puller", password: "s3cret-registry-pw" };

describe("templates from OCI images pulled from a loopback registry", { skip: sandboxSkipReason() ?? registrySkipReason() ?? false }, () => {
  let s: Sandboxd;
  let reg: Registry;
  let priv: Registry;
  let ctx: string;
  let ca: Buffer;
  let junk: Server;
  let junkHost: string;
  let plain: Server;
  let plainHost: string;

  before(async () => {
    reg = await startRegistry();
    priv = await startRegistry(PRIVATE);
    // a "registry" that answers every request with garbage, over plain HTTP
    junk = createServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end('{"schemaVersion": 2, "garbage'));
    await new Promise<void>((r) => junk.listen(0, "127.0.0.1", r));
    junkHost = `127.0.0.1:${(junk.address() as AddressInfo).port}`;
    plain = createServer((_req, res) => res.writeHead(404).end());
    await new Promise<void>((r) => plain.listen(0, "127.0.0.1", r));
    plainHost = `127.0.0.1:${(plain.address() as AddressInfo).port}`;
    // the public registry is also the Docker Hub mirror: it serves library/ubuntu:22.04
    s = await startSandboxd({ args: ["--insecure-registry", reg.host, "--insecure-registry", priv.host, "--insecure-registry", junkHost, "--registry-mirror", `http://${reg.host}`] });
    ca = readFileSync(s.caFile);
    const base = cachedBaseRootfs(CACHE_DIR);
    assert.ok(base, "the base rootfs is built by sandboxd's start");
    const layout = await fixtureLayout(CACHE_DIR, base);
    for (const tag of ["debian", "app", "nouser", "musl", "arm64"]) push(layout, tag, `${reg.host}/test/${tag}:1`);
    push(layout, "multi", `${reg.host}/test/multi:1`, { all: true });
    push(layout, "debian", `${reg.host}/library/ubuntu:22.04`);
    push(layout, "app", `${priv.host}/private/app:1`, { creds: `${PRIVATE.user}:${PRIVATE.password}` });
    ctx = mkdtempSync(join(tmpdir(), "tpl-oci-ctx-"));
    mkdirSync(join(ctx, "tree", "sub"), { recursive: true });
    writeFileSync(join(ctx, "tree", "sub", "real.txt"), "real file\n");
    symlinkSync("/etc/hostname", join(ctx, "tree", "abs-link"));
    symlinkSync("sub/real.txt", join(ctx, "tree", "rel-link"));
  });
  after(async () => {
    await s?.stop();
    await reg?.stop();
    await priv?.stop();
    junk?.close();
    plain?.close();
    if (ctx) rmSync(ctx, { recursive: true, force: true });
  });

  test("fromImage of a registry image: its Env, WorkingDir and User hold in sandboxes, its whiteout too; the log shows the pull; a second build uses the cached image", async () => {
    const got = await runSdk(s, `
      import { Template, Sandbox } from "e2b";
      const logs = [];
      await Template.build(Template().fromImage("${reg.host}/test/app:1").runCmd("echo built-as-$(whoami) > /tmp/built.txt"), "oci-app", { memoryMB: 512, onBuildLogs: (e) => logs.push(e.message) });
      const sbx = await Sandbox.create("oci-app");
      const r = await sbx.commands.run('whoami; pwd; echo "$APP_GREETING"; cat hello.txt /tmp/built.txt; [ -e /usr/share/doc ] && echo doc-present || echo doc-gone; id -un user');
      await sbx.kill();
      const again = [];
      await Template.build(Template().fromImage("${reg.host}/test/app:1").runCmd("true"), "oci-app-2", { memoryMB: 512, onBuildLogs: (e) => again.push(e.message) });
      console.log(JSON.stringify({ out: r.stdout.trim().split("\\n"), logs, again }));
    `);
    assert.deepEqual(got.out, ["app", "/srv/app", "hello from the image", "hello from the app image", "built-as-app", "doc-gone", "user"]);
    const log = got.logs.join("\n");
    assert.match(log, /pulling .*test\/app:1 \(sha256:[0-9a-f]{12}\): \d+ layers, [\d.]+ MiB/);
    assert.match(log, /layer \d+\/\d+ [0-9a-f]{12}: [\d.]+ [KM]iB done/);
    assert.match(log, /pulled [\d.]+ MiB in \d+ layer/);
    assert.ok(got.again.some((m: string) => m.startsWith("using the cached image")), got.again.join("\n"));
    assert.ok(!got.again.some((m: string) => m.startsWith("pulling")), got.again.join("\n"));
  });

  test("Docker Hub names go to the mirror: fromUbuntuImage('22.04') and fromImage('ubuntu:22.04') build with no Internet; a multi-arch index gives this host's image", async () => {
    const got = await runSdk(s, `
      import { Template, Sandbox } from "e2b";
      const logs = [];
      await Template.build(Template().fromUbuntuImage("22.04").runCmd("echo ok > /tmp/ok"), "oci-ubuntu", { memoryMB: 512, onBuildLogs: (e) => logs.push(e.message) });
      await Template.build(Template().fromImage("ubuntu:22.04").runCmd("echo ok2 > /tmp/ok"), "oci-ubuntu-2", { memoryMB: 512 });
      await Template.build(Template().fromImage("${reg.host}/test/multi:1").runCmd("true"), "oci-multi", { memoryMB: 512 });
      const a = await Sandbox.create("oci-ubuntu");
      const ra = await a.commands.run("whoami; cat /tmp/ok; sudo -n whoami");
      await a.kill();
      const b = await Sandbox.create("oci-multi");
      const rb = await b.commands.run("cat /etc/fixture-arch");
      await b.kill();
      console.log(JSON.stringify({ a: ra.stdout.trim().split("\\n"), b: rb.stdout.trim(), logs }));
    `);
    assert.deepEqual(got.a, ["user", "ok", "root"]);
    assert.equal(got.b, "amd64");
    assert.ok(got.logs.some((m: string) => new RegExp(`pulling docker.io/library/ubuntu:22.04 from mirror ${reg.host.replace(/\./g, "\\.")}`).test(m)), got.logs.join("\n"));
  });

  test("a private registry: the SDK's credentials pull; wrong or no credentials fail clearly (and keep failing for another team once pulled); the password is in no log", async () => {
    const script = (order: string[], prefix = "oci-private-") => `
      import { Template } from "e2b";
      const out = {};
      const all = { ok: { username: "${PRIVATE.user}", password: "${PRIVATE.password}" }, wrong: { username: "${PRIVATE.user}", password: "not-the-password" }, none: undefined };
      for (const name of ${JSON.stringify(order)}) {
        const logs = [];
        try {
          await Template.build(Template().fromImage("${priv.host}/private/app:1", all[name]).runCmd("true"), "${prefix}" + name, { memoryMB: 512, onBuildLogs: (e) => logs.push(e.message) });
          out[name] = { ok: true, logs };
        } catch (e) {
          out[name] = { ok: false, error: e.message, logs };
        }
      }
      console.log(JSON.stringify(out));
    `;
    const got = await runSdk(s, script(["wrong", "none", "ok"]));
    assert.equal(got.ok.ok, true, JSON.stringify(got.ok));
    assert.equal(got.wrong.ok, false);
    assert.match(got.wrong.error, /pulling .*private\/app:1: access denied/);
    assert.equal(got.none.ok, false);
    assert.match(got.none.error, /access denied/);
    // the image is cached now, but another team has not shown the registry any right to it
    const other = await runSdk(s, script(["none"], "oci-other-"), { E2B_API_KEY: teamKey(s, "oci-other") });
    assert.equal(other.none.ok, false);
    assert.match(other.none.error, /access denied/);
    for (const r of [got, other]) assert.ok(!JSON.stringify(r).includes(PRIVATE.password));
    assert.ok(!s.logs().includes(PRIVATE.password), "sandboxd's own log");
  });

  test("images that cannot be built from fail with a clear reason: an unknown tag, a musl image, an image for another architecture, a bad name, a registry answering garbage, a plain-HTTP registry not listed as insecure", async () => {
    const got = await runSdk(s, `
      import { Template } from "e2b";
      const out = {};
      for (const [name, image] of [["unknown", "${reg.host}/test/app:nope"], ["musl", "${reg.host}/test/musl:1"], ["arm64", "${reg.host}/test/arm64:1"], ["bad", "${reg.host}/Test/UPPER:1"], ["junk", "${junkHost}/test/app:1"], ["plain", "${plainHost}/test/app:1"]]) {
        try {
          await Template.build(Template().fromImage(image).runCmd("true"), "oci-fail-" + name, { memoryMB: 512 });
          out[name] = "built";
        } catch (e) {
          out[name] = e.message;
        }
      }
      console.log(JSON.stringify(out));
    `);
    assert.match(got.unknown, /pulling .*test\/app:nope: not found/);
    assert.match(got.musl, /glibc.*musl image \(Alpine\)/);
    assert.match(got.arm64, /the image is for arm64; this host runs amd64/);
    assert.match(got.bad, /invalid image reference/);
    assert.match(got.junk, new RegExp(`pulling ${junkHost}/test/app:1: failed: .+`));
    // plain HTTP only for registries listed with --insecure-registry
    assert.match(got.plain, new RegExp(`pulling ${plainHost}/test/app:1: failed: .*(HTTP response to HTTPS client|tls|TLS)`));
  });

  test("a multi-stage Dockerfile: ARG before FROM, COPY --from a stage (by name and number, with a glob) and from an image; CMD runs under the image's ENTRYPOINT", async () => {
    const dockerfile = [
      `ARG APP_IMAGE=${reg.host}/test/app:1`,
      "FROM debian:bookworm AS build",
      "ARG GREETING=hi",
      "ENV OUT=/out",
      'RUN mkdir -p $OUT && echo "$GREETING from build" > $OUT/a.txt && echo b > $OUT/b.txt && echo c > $OUT/c.log',
      "FROM ${APP_IMAGE}",
      "COPY --from=build /out/*.txt /srv/app/copied/",
      "COPY --from=0 /out/c.log /srv/app/c.log",
      `COPY --from=${reg.host}/test/nouser:1 /etc/debian_version /srv/app/from-image`,
      'CMD ["--flag", "x y"]',
    ].join("\n");
    const created = await api(s, ca, "POST", "/templates", { body: { dockerfile, alias: "oci-multistage", memoryMB: 512, readyCmd: "test -f /tmp/started.txt" } });
    assert.equal(created.status, 202, created.body);
    const built = await waitForBuild(s, ca, created.json.templateID, created.json.buildID);
    assert.equal(built.last.status, "ready", JSON.stringify(built.last.reason) + built.logs.map((l) => l.message).join("\n"));
    assert.ok(built.logs.some((l) => l.step === "build:3" && /^\[build 3\/3\] RUN/.test(l.message)), built.logs.map((l) => `${l.step} ${l.message}`).join("\n"));
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create("oci-multistage");
      const r = await sbx.commands.run("cat /srv/app/copied/a.txt /srv/app/copied/b.txt /srv/app/c.log; ls /srv/app/copied | wc -l; test -s /srv/app/from-image && echo from-image; cat /tmp/started.txt");
      await sbx.kill();
      console.log(JSON.stringify(r.stdout.trim().split("\\n")));
    `);
    assert.deepEqual(got, ["hi from build", "b", "c", "2", "from-image", "started with --flag x y"]);
  });

  test("an image without user 'user' gets one, with sudo; Template().copy() of a folder with absolute and relative symlinks, as links and resolved", async () => {
    const got = await runSdk(s, `
      import { Template, Sandbox } from "e2b";
      const t = Template({ fileContextPath: ${JSON.stringify(ctx)} }).fromImage("${reg.host}/test/nouser:1")
        .copy("tree", "/srv/links/")
        .copy("tree", "/srv/resolved/", { resolveSymlinks: true });
      await Template.build(t, "oci-nouser", { memoryMB: 512 });
      const sbx = await Sandbox.create("oci-nouser");
      const r = await sbx.commands.run("whoami; sudo -n whoami; readlink /srv/links/abs-link /srv/links/rel-link; cat /srv/links/rel-link; [ -L /srv/resolved/rel-link ] && echo link || cat /srv/resolved/rel-link");
      await sbx.kill();
      console.log(JSON.stringify(r.stdout.trim().split("\\n")));
    `);
    assert.deepEqual(got, ["user", "root", "/etc/hostname", "sub/real.txt", "real file", "real file"]);
  });
});

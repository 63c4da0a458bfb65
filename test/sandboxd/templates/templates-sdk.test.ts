import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create as tarCreate } from "tar";
import { api } from "../helpers/api-client.js";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk, waitForBuild } from "../helpers/templates.js";

/** A DELETE with a JSON body (the shared API helper sends DELETE bodies without a Content-Length). */
function deleteWithBody(s: Sandboxd, ca: Buffer, path: string, body: unknown): Promise<{ status: number; body: string }> {
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const headers = { host: `api.e2b.localhost:${s.port}`, "x-api-key": s.apiKey, "content-type": "application/json", "content-length": String(payload.length) };
    const req = request({ host: "127.0.0.1", port: s.port, path, method: "DELETE", ca, servername: "api.e2b.localhost", agent: false, headers }, (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on("error", reject);
    req.end(payload);
  });
}

/** A PUT of `body` to an upload URL with its Content-Length; the status. */
function putFull(s: Sandboxd, ca: Buffer, url: string, body: Buffer): Promise<number> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port: s.port, path: u.pathname + u.search, method: "PUT", ca, servername: "api.e2b.localhost", agent: false, headers: { host: u.host, "content-length": String(body.length) } },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** A PUT to an upload URL that announces `declared` bytes, sends `body`, and then hangs up. */
function putShort(s: Sandboxd, ca: Buffer, url: string, body: Buffer, declared: number): Promise<number | "reset"> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const req = request(
      { host: "127.0.0.1", port: s.port, path: u.pathname + u.search, method: "PUT", ca, servername: "api.e2b.localhost", agent: false, headers: { host: u.host, "content-length": String(declared) } },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on("error", () => resolve("reset"));
    req.write(body);
    setTimeout(() => req.destroy(), 500);
  });
}

describe("templates from the published SDK's Template() builder", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  let ctx: string;

  before(async () => {
    s = await startSandboxd({ args: ["--network-cidr", "198.19.211.0/24"] });
    ca = readFileSync(s.caFile);
    ctx = mkdtempSync(join(tmpdir(), "tpl-sdk-ctx-"));
    mkdirSync(join(ctx, "app"));
    writeFileSync(join(ctx, "app", "hello.txt"), "hello from copy\n");
    writeFileSync(join(ctx, "app", "run.sh"), "#!/bin/sh\necho ran\n", { mode: 0o755 });
    writeFileSync(join(ctx, "config.json"), '{"mode":"sdk"}\n');
  });
  after(async () => {
    await s?.stop();
    if (ctx) rmSync(ctx, { recursive: true, force: true });
  });

  const template = (marker: string) => `
    import { Template, waitForPort } from "e2b";
    const t = Template({ fileContextPath: ${JSON.stringify(ctx)} })
      .fromBaseImage()
      .setEnvs({ APP_MODE: "sdk", SPACED: "a b" })
      .runCmd("mkdir -p /srv/app && chown user /srv/app", { user: "root" })
      .copy("app", "/srv/app/")
      .copy("config.json", "/srv/app/config.json", { mode: 0o640 })
      .setWorkdir("/srv/app")
      .runCmd("cat hello.txt > from-run.txt && whoami > who.txt && echo ${marker} > marker.txt")
      .setStartCmd("python3 -m http.server 8123 --directory /srv/app >/dev/null 2>&1", waitForPort(8123));
  `;

  test("Template.build with COPY, ENV, WORKDIR, USER and a start command → Sandbox.create(name:tag) sees all of it; list, tags, exists; a rebuild is cached", async () => {
    const got = await runSdk(s, `
      ${template("one")}
      const logs = [];
      const info = await Template.build(t, "tpl-sdk:v1", { cpuCount: 2, memoryMB: 512, onBuildLogs: (e) => logs.push(e.message) });
      const { Sandbox } = await import("e2b");
      const sbx = await Sandbox.create("tpl-sdk:v1");
      const r = await sbx.commands.run('whoami; pwd; echo "$APP_MODE|$SPACED"; cat hello.txt from-run.txt who.txt marker.txt; ./run.sh; stat -c "%U %a" config.json; curl -s localhost:8123/marker.txt');
      await sbx.kill();
      const exists = await Template.exists("tpl-sdk");
      const missing = await Template.exists("tpl-nope");
      const again = [];
      await Template.build(t, "tpl-sdk:v1", { onBuildLogs: (e) => again.push(e.message) });
      console.log(JSON.stringify({ info, logs, out: r.stdout.trim().split("\\n"), exists, missing, again }));
    `);
    assert.equal(got.info.name, "tpl-sdk:v1");
    assert.deepEqual(got.info.tags, ["v1"]);
    assert.deepEqual(got.out, ["user", "/srv/app", "sdk|a b", "hello from copy", "hello from copy", "user", "one", "ran", "user 640", "one"]);
    assert.equal(got.exists, true);
    assert.equal(got.missing, false);
    assert.ok(got.logs.some((m: string) => /\[\d+\/\d+\] COPY app \/srv\/app\//.test(m)), got.logs.join("\n"));
    assert.ok(got.again.some((m: string) => m.includes("Skipping upload of 'app', already cached")), got.again.join("\n"));
    assert.ok(got.again.filter((m: string) => m.startsWith("CACHED")).length >= 4, got.again.join("\n"));

    const listed = (await api(s, ca, "GET", "/templates")).json.find((t: { aliases: string[] }) => t.aliases[0] === "tpl-sdk");
    assert.equal(listed.buildStatus, "ready");
    assert.equal(listed.buildCount, 2);
    assert.equal(listed.spawnCount, 1);
    const tags = await api(s, ca, "GET", `/templates/${listed.templateID}/tags`);
    assert.equal(tags.status, 200);
    assert.deepEqual(tags.json.map((t: { tag: string }) => t.tag), ["default", "v1"]);
    assert.equal(tags.json.find((t: { tag: string }) => t.tag === "v1").buildID, listed.buildID);

    const assigned = await api(s, ca, "POST", "/templates/tags", { body: { target: "tpl-sdk:v1", tags: ["Stable"] } });
    assert.equal(assigned.status, 201, assigned.body);
    assert.deepEqual(assigned.json, { buildID: listed.buildID, tags: ["stable"] });
    const badTag = await api(s, ca, "POST", "/templates/tags", { body: { target: "tpl-sdk:v1", tags: ["0b5e3c1a-1111-4222-8333-444455556666"] } });
    assert.equal(badTag.status, 400);
    assert.match(badTag.json.message, /cannot be a UUID/);
    const removed = await deleteWithBody(s, ca, "/templates/tags", { name: "tpl-sdk", tags: ["stable"] });
    assert.equal(removed.status, 204, removed.body);
    const unknownTag = await api(s, ca, "POST", "/sandboxes", { body: { templateID: "tpl-sdk:stable" } });
    assert.equal(unknownTag.status, 404);
  });

  test("fromTemplate builds on another template's rootfs, with the free disk minFreeDiskMb asks for; an unknown base template fails the build", async () => {
    const got = await runSdk(s, `
      import { Template, Sandbox } from "e2b";
      const child = Template().fromTemplate("tpl-sdk").setUser("root").runCmd("cat /srv/app/marker.txt > /inherited && useradd -m child").setUser("child").setWorkdir("/home/child");
      await Template.build(child, "tpl-child", { memoryMB: 256, minFreeDiskMb: 20000 });
      const sbx = await Sandbox.create("tpl-child");
      const r = await sbx.commands.run("cat /inherited; whoami; pwd; cat /srv/app/hello.txt");
      const free = Number((await sbx.commands.run("df -m --output=avail / | tail -n1")).stdout.trim());
      await sbx.kill();
      let error = "";
      try {
        await Template.build(Template().fromTemplate("tpl-nope").runCmd("true"), "tpl-orphan");
      } catch (e) {
        error = e.message;
      }
      console.log(JSON.stringify({ out: r.stdout.trim().split("\\n"), error, free }));
    `);
    assert.deepEqual(got.out, ["one", "child", "/home/child", "hello from copy"]);
    assert.ok(got.free >= 20000, `minFreeDiskMb 20000: the sandbox has ${got.free} MiB free`);
    assert.match(got.error, /base template 'tpl-nope' not found/);
  });

  test("uploads: a truncated upload keeps nothing; a COPY of a file the upload lacks fails the build with the step", async () => {
    const v3 = await api(s, ca, "POST", "/v3/templates", { body: { name: "tpl-raw", cpuCount: 1, memoryMB: 256 } });
    assert.equal(v3.status, 202, v3.body);
    const { templateID, buildID } = v3.json;
    assert.deepEqual(v3.json.names, ["tpl-raw"]);
    assert.deepEqual(await api(s, ca, "POST", "/v3/templates", { body: { cpuCount: 1 } }).then((r) => [r.status, r.json.message]), [400, "validation error: Name is required"]);

    const link = await api(s, ca, "GET", `/templates/${templateID}/files/hash1`);
    assert.equal(link.status, 201);
    assert.equal(link.json.present, false);
    assert.match(link.json.url, /^https:\/\/api\.e2b\.localhost:\d+\/templates\/.+\/files\/hash1\?token=/);
    assert.equal(await putShort(s, ca, link.json.url, Buffer.from("short"), 1000).then((r) => r === "reset" || r >= 400), true);
    assert.equal((await api(s, ca, "GET", `/templates/${templateID}/files/hash1`)).json.present, false);
    assert.equal(await putFull(s, ca, link.json.url.replace(/token=[^&]+/, "token=default.9999999999999.AAAA"), Buffer.from("x")), 403);
    assert.equal(await putFull(s, ca, link.json.url.replace("hash1", "hash2"), Buffer.from("x")), 403);

    const dir = mkdtempSync(join(tmpdir(), "tpl-upload-"));
    writeFileSync(join(dir, "other.txt"), "other\n");
    await tarCreate({ gzip: true, cwd: dir, file: join(dir, "files.tar.gz") }, ["other.txt"]);
    const tgz = readFileSync(join(dir, "files.tar.gz"));
    rmSync(dir, { recursive: true, force: true });
    assert.equal(await putFull(s, ca, link.json.url, tgz), 200);
    assert.equal((await api(s, ca, "GET", `/templates/${templateID}/files/hash1`)).json.present, true);

    // too large: refused before a byte is read; not a tar: the COPY's step fails with that reason
    const big = await api(s, ca, "GET", `/templates/${templateID}/files/hash-big`);
    assert.equal(await putShort(s, ca, big.json.url, Buffer.alloc(0), 2 * 1024 ** 3).then((r) => r), 413);
    const junk = await api(s, ca, "GET", `/templates/${templateID}/files/hash-junk`);
    assert.equal(await putFull(s, ca, junk.json.url, Buffer.from("this is not a tar archive at all, not even gzip")), 200);
    const junkBuild = await api(s, ca, "POST", "/v3/templates", { body: { name: "tpl-junk", cpuCount: 1, memoryMB: 256 } });
    await api(s, ca, "POST", `/v2/templates/${junkBuild.json.templateID}/builds/${junkBuild.json.buildID}`, { body: { steps: [{ type: "COPY", args: ["a", "/a"], filesHash: "hash-junk" }] } });
    const j = await waitForBuild(s, ca, junkBuild.json.templateID, junkBuild.json.buildID);
    assert.equal(j.last.status, "error");
    assert.equal(j.last.reason?.step, "1");
    assert.match(j.last.reason!.message, /COPY a: the uploaded files are not a valid tar archive/);

    const bad = await api(s, ca, "POST", `/v2/templates/${templateID}/builds/${buildID}`, { body: { steps: [{ type: "FROB", args: [] }] } });
    assert.equal(bad.status, 400);
    assert.match(bad.json.message, /unsupported step type "FROB"/);
    const start = await api(s, ca, "POST", `/v2/templates/${templateID}/builds/${buildID}`, {
      body: { fromImage: "e2bdev/base", steps: [{ type: "COPY", args: ["other.txt", "/tmp/"], filesHash: "hash1" }, { type: "COPY", args: ["missing.txt", "/tmp/"], filesHash: "hash1" }] },
    });
    assert.equal(start.status, 202, start.body);
    const twice = await api(s, ca, "POST", `/v2/templates/${templateID}/builds/${buildID}`, { body: { steps: [] } });
    assert.equal(twice.status, 400);
    assert.match(twice.json.message, /build is not in waiting state/);
    const r = await waitForBuild(s, ca, templateID, buildID);
    assert.equal(r.last.status, "error");
    assert.equal(r.last.reason?.step, "2");
    assert.ok(r.last.reason!.logEntries!.some((e) => e.message.includes("COPY: missing.txt is not in the uploaded files")), JSON.stringify(r.last.reason));
    const unknown = await api(s, ca, "GET", `/templates/${templateID}/builds/00000000-0000-4000-8000-000000000000/status`);
    assert.equal(unknown.status, 400);
    assert.match(unknown.json.message, /Build '.*' not found/);
  });

  test("DELETE /templates/{id}: the template and its builds go; base cannot be deleted", async () => {
    const list = (await api(s, ca, "GET", "/templates")).json as { templateID: string; aliases: string[] }[];
    const raw = list.find((t) => t.aliases[0] === "tpl-raw")!;
    const base = list.find((t) => t.aliases[0] === "base")!;
    assert.equal((await api(s, ca, "DELETE", `/templates/${raw.templateID}`)).status, 204);
    assert.equal((await api(s, ca, "DELETE", `/templates/${raw.templateID}`)).status, 404);
    const b = await api(s, ca, "DELETE", `/templates/${base.templateID}`);
    assert.equal(b.status, 400);
    assert.match(b.json.message, /built in/);
    const after = (await api(s, ca, "GET", "/v2/templates?limit=1")) ;
    assert.equal(after.json.length, 1);
    assert.ok(after.headers["x-next-token"], "a second page is announced");
    const page2 = await api(s, ca, "GET", `/v2/templates?limit=1&nextToken=${after.headers["x-next-token"]}`);
    assert.equal(page2.json.length, 1);
    assert.notEqual(page2.json[0].templateID, after.json[0].templateID);
    assert.ok(![...after.json, ...page2.json].some((t: { templateID: string }) => t.templateID === raw.templateID));
  });
});

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { api } from "../helpers/api-client.js";
import { gzipBomb, rawTar, spreadBomb, teamKey, upload, put, type RawEntry } from "../helpers/hostile-tar.js";
import { ROOT, NODE, sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/sdk-run.js";
import { waitForBuild } from "../helpers/templates.js";

const MiB = 1024 * 1024;
/** Limits this server runs with, small enough for a test to pass them. */
const LIMITS = {
  SANDBOXD_TEMPLATE_EXTRACT_MAX_BYTES: String(8 * MiB),
  SANDBOXD_TEMPLATE_EXTRACT_MAX_DEPTH: "16",
  SANDBOXD_TEMPLATE_EXTRACT_MAX_ENTRIES: "2000",
  SANDBOXD_TEMPLATE_TEAM_MAX_UPLOADS: "6",
  SANDBOXD_TEMPLATE_TEAM_MAX_BYTES: String(24 * MiB),
};

/** Every name below a directory (recursive), for "nothing was left" checks. */
function walk(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: "utf8" });
}

/** Bytes of the regular files below a directory. */
function bytesBelow(dir: string): number {
  return walk(dir).reduce((n, p) => {
    const st = statSync(join(dir, p), { throwIfNoEntry: false });
    return n + (st?.isFile() ? st.size : 0);
  }, 0);
}

describe("hostile templates and uploads: no team reaches another's files or layers, the host's files, or unbounded disk", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd | undefined;
  let ca: Buffer;
  let mallory = "";
  const dataDir = mkdtempSync(join(tmpdir(), "sandboxd-attack-tpl-"));
  const hostDir = mkdtempSync(join(tmpdir(), "attack-tpl-host-"));
  const ctxA = mkdtempSync(join(tmpdir(), "attack-tpl-ctx-"));
  const start = () => startSandboxd({ dataDir, env: LIMITS });
  const filesOf = (team: string) => join(dataDir, "templates", "files", team);

  /** Requests a v3 build as `key`'s team and starts it with `body`; waits for it to finish. */
  async function build(name: string, body: unknown, key = s!.apiKey) {
    const r = await api(s!, ca, "POST", "/v3/templates", { body: { name, cpuCount: 1, memoryMB: 256 }, key });
    assert.equal(r.status, 202, r.body);
    const st = await api(s!, ca, "POST", `/v2/templates/${r.json.templateID}/builds/${r.json.buildID}`, { body, key });
    assert.equal(st.status, 202, st.body);
    return { templateID: r.json.templateID as string, ...(await waitForBuild(s!, ca, r.json.templateID, r.json.buildID)) };
  }
  /** A template to upload into (the upload link is per template and team). */
  async function holder(name: string, key = s!.apiKey): Promise<string> {
    const r = await api(s!, ca, "POST", "/v3/templates", { body: { name, cpuCount: 1, memoryMB: 256 }, key });
    assert.equal(r.status, 202, r.body);
    return r.json.templateID;
  }
  const canaries = () => readdirSync(hostDir).sort().map((n) => `${n}=${readFileSync(join(hostDir, n), "utf8")}`);

  before(async () => {
    writeFileSync(join(hostDir, "canary.txt"), "host canary\n");
    mkdirSync(join(ctxA, "app"));
    writeFileSync(join(ctxA, "app", "secret.txt"), "team A's own file\n");
    s = await start();
    ca = readFileSync(s.caFile);
    mallory = teamKey(s, "mallory");
  });
  after(async () => {
    await s?.stop();
    for (const d of [dataDir, hostDir, ctxA]) rmSync(d, { recursive: true, force: true });
  });

  test("a team that uploads first under another team's files hash gets neither its COPY nor a CACHED step of it", async () => {
    const tplA = `
      import { Template } from "e2b";
      const t = Template({ fileContextPath: ${JSON.stringify(ctxA)} }).fromBaseImage().runCmd("echo before-copy").copy("app", "/srv/app/");`;
    // what team A's SDK will send (the same SDK computes the same hash from the same files)
    const { body } = await runSdk(s!, `${tplA}\nconsole.log(JSON.stringify({ body: await Template.toJSON(t) }));`, { cwd: ROOT });
    const steps = JSON.parse(body).steps as { type: string; filesHash?: string }[];
    const hash = steps.find((x) => x.type === "COPY")!.filesHash!;
    assert.match(hash, /^[0-9a-f]{64}$/);

    // team B uploads its own files under that hash and builds the very same steps first
    const poison = rawTar([{ path: "app", type: "Directory" }, { path: "app/secret.txt", body: Buffer.from("POISON from team B\n") }]);
    const b = await api(s!, ca, "POST", "/v3/templates", { body: { name: "poisoner", cpuCount: 1, memoryMB: 256 }, key: mallory });
    const bt = b.json.templateID as string;
    assert.equal((await upload(s!, ca, mallory, bt, hash, poison)).status, 200);
    assert.equal((await api(s!, ca, "POST", `/v2/templates/${bt}/builds/${b.json.buildID}`, { body: JSON.parse(body), key: mallory })).status, 202);
    let rb: { status: string; reason?: unknown };
    do {
      await new Promise((r) => setTimeout(r, 300));
      rb = (await api(s!, ca, "GET", `/templates/${bt}/builds/${b.json.buildID}/status`, { key: mallory })).json;
    } while (rb.status === "building" || rb.status === "waiting");
    assert.equal(rb.status, "ready", JSON.stringify(rb.reason));

    const got = await runSdk(s!, `${tplA}
      const logs = [];
      await Template.build(t, "victim", { cpuCount: 1, memoryMB: 512, onBuildLogs: (e) => logs.push(e.message) });
      const { Sandbox } = await import("e2b");
      const sbx = await Sandbox.create("victim");
      const r = await sbx.commands.run("cat /srv/app/secret.txt");
      await sbx.kill();
      console.log(JSON.stringify({ logs, out: r.stdout }));`, { cwd: ROOT, timeoutMs: 540_000 });
    assert.equal(got.out, "team A's own file\n");
    assert.deepEqual(got.logs.filter((l: string) => /CACHED/.test(l)), [], "no step of another team's build is served or shown");
    // each team's upload under the hash is its own
    const tars = (team: string) => readdirSync(filesOf(team)).filter((n) => n.startsWith(`${hash}.`) && n.endsWith(".tar"));
    assert.equal(tars("mallory").length, 1);
    assert.equal(tars("default").length, 1);
    assert.notEqual(tars("mallory")[0], tars("default")[0]);
  });

  test("gzip bombs (a few KiB declaring more than the cap; many files adding up past it) fail their builds with the reason and leave nothing", async () => {
    const t = await holder("bomb-holder");
    const before = bytesBelow(join(dataDir, "templates", "files"));
    const spread = spreadBomb(24, MiB);
    assert.ok(spread.length < 512 * 1024, `spread bomb is ${spread.length} bytes`);
    assert.equal((await upload(s!, ca, s!.apiKey, t, "spread", spread)).status, 200);
    const r2 = await build("spread", { steps: [{ type: "COPY", args: [".", "/tmp/spread/"], filesHash: "spread" }] });
    assert.equal(r2.last.status, "error");
    assert.match(r2.last.reason!.message, /COPY \.: the uploaded files were refused: the files unpack to more than 8388608 bytes/);
    assert.deepEqual(walk(filesOf("default")).filter((n) => n.startsWith("spread.") && !n.endsWith(".tar")), []);
    const bomb = gzipBomb(64 * MiB);
    assert.ok(bomb.length < 100 * 1024, `bomb is ${bomb.length} bytes`);
    assert.equal((await upload(s!, ca, s!.apiKey, t, "bomb", bomb)).status, 200);
    const r = await build("bomb", { steps: [{ type: "COPY", args: ["zeros.bin", "/tmp/"], filesHash: "bomb" }] });
    assert.equal(r.last.status, "error");
    assert.equal(r.last.reason?.step, "1");
    assert.match(r.last.reason!.message, /COPY zeros\.bin: the uploaded files were refused: the files unpack to more than 8388608 bytes/);
    assert.deepEqual(walk(filesOf("default")).filter((n) => n.startsWith("bomb.") && !n.endsWith(".tar")), []);
    assert.ok(bytesBelow(join(dataDir, "templates", "files")) - before < MiB, "the data dir did not grow by the bomb");

    assert.ok(bytesBelow(join(dataDir, "templates", "files")) - before < 2 * MiB, "the data dir did not grow by the bombs");
  });

  test("archives with '..', absolute paths, devices, FIFOs, out-of-tree hard links, writes through their own symlinks, too deep or too many entries: refused, nothing written", async () => {
    const t = await holder("hostile-holder");
    const body = Buffer.from("planted\n");
    const cases: [string, RawEntry[], RegExp][] = [
      ["dotdot", [{ path: "ok.txt", body }, { path: "../../escape.txt", body }], /path "\.\.\/\.\.\/escape\.txt" contains '\.\.'/],
      ["absolute", [{ path: `${hostDir}/abs-planted.txt`, body }], /is absolute/],
      ["chardev", [{ path: "null", type: "CharacterDevice" }], /is a CharacterDevice: only files, directories and links/],
      ["blockdev", [{ path: "sda", type: "BlockDevice" }], /is a BlockDevice/],
      ["fifo", [{ path: "pipe", type: "FIFO" }], /is a FIFO/],
      ["hardlink-up", [{ path: "hl", type: "Link", linkpath: "../../../../../../etc/shadow" }], /hard link target .* contains '\.\.'/],
      ["hardlink-abs", [{ path: "hl", type: "Link", linkpath: "/etc/shadow" }], /hard link target "\/etc\/shadow" is absolute/],
      ["hardlink-via-symlink", [{ path: "up", type: "SymbolicLink", linkpath: "/etc" }, { path: "hl", type: "Link", linkpath: "up/shadow" }], /points through a non-directory/],
      ["through-symlink", [{ path: "out", type: "SymbolicLink", linkpath: hostDir }, { path: "out/planted.txt", body }], /goes through a symlink/],
      ["deep", [{ path: "a/".repeat(20) + "f", body }], /deeper than 16 components/],
      ["many", Array.from({ length: 2100 }, (_, i) => ({ path: `f${i}`, body })), /more than 2000 entries/],
    ];
    for (const [name, entries, reason] of cases) {
      assert.equal((await upload(s!, ca, s!.apiKey, t, `hostile-${name}`, rawTar(entries))).status, 200, name);
      const r = await build(`hostile-${name}`, { steps: [{ type: "COPY", args: [".", "/opt/up/"], filesHash: `hostile-${name}` }] });
      assert.equal(r.last.status, "error", name);
      assert.match(r.last.reason!.message, reason, name);
      assert.deepEqual(walk(filesOf("default")).filter((n) => (n.startsWith(`hostile-${name}.`) && !n.endsWith(".tar")) || n.includes("escape") || n.includes("planted")), [], name);
      assert.ok(!existsSync(join(dataDir, "templates", "escape.txt")) && !existsSync(join(dataDir, "escape.txt")), name);
      assert.deepEqual(canaries(), ["canary.txt=host canary\n"], name);
    }
  });

  test("symlinks (absolute and relative targets) and in-tree hard links are kept as the archive has them", async () => {
    const t = await holder("links-holder");
    const tar = rawTar([
      { path: "abs", type: "SymbolicLink", linkpath: "/etc/hostname" },
      { path: "rel", type: "SymbolicLink", linkpath: "../../etc/os-release" },
      { path: "f.txt", body: Buffer.from("f\n") },
      { path: "hl", type: "Link", linkpath: "f.txt" },
    ]);
    assert.equal((await upload(s!, ca, s!.apiKey, t, "links", tar)).status, 200);
    const r = await build("links", { steps: [{ type: "COPY", args: [".", "/opt/up/"], filesHash: "links" }] });
    assert.equal(r.last.status, "ready", JSON.stringify(r.last.reason));
    const got = await runSdk(s!, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create("links");
      const r = await sbx.commands.run("readlink /opt/up/abs /opt/up/rel; cat /opt/up/hl; stat -c %h /opt/up/f.txt");
      await sbx.kill();
      console.log(JSON.stringify({ out: r.stdout }));`);
    assert.equal(got.out, "/etc/hostname\n../../etc/os-release\nf\n2\n");
  });

  test("a template's own symlinks to host paths (RUN ln -s, then COPY and WORKDIR into them) stay inside the sandbox", async () => {
    const t = await holder("symlink-holder");
    assert.equal((await upload(s!, ca, s!.apiKey, t, "symlink-files", rawTar([{ path: "planted.txt", body: Buffer.from("planted\n") }]))).status, 200);
    const r = await build("symlink-run", {
      steps: [
        { type: "RUN", args: [`mkdir -p ${hostDir} && echo sandbox-copy > ${hostDir}/canary.txt && ln -s ${hostDir} /target && ln -s ${hostDir} /wd && ln -s ${hostDir}/canary.txt /canary`, "root"] },
        { type: "COPY", args: ["planted.txt", "/target/"], filesHash: "symlink-files" },
        { type: "COPY", args: ["planted.txt", "/canary"], filesHash: "symlink-files" },
        { type: "WORKDIR", args: ["/wd"] },
        { type: "RUN", args: ["echo run > run-planted.txt", "root"] },
      ],
    });
    assert.equal(r.last.status, "ready", JSON.stringify(r.last.reason));
    assert.deepEqual(canaries(), ["canary.txt=host canary\n"]);
    // what the steps wrote is in the sandbox's own tree at that path
    const got = await runSdk(s!, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create("symlink-run");
      const r = await sbx.commands.run("cd ${hostDir} && cat planted.txt canary.txt run-planted.txt");
      await sbx.kill();
      console.log(JSON.stringify({ out: r.stdout }));`);
    assert.equal(got.out, "planted\nplanted\nrun\n");
  });

  test("a step's working directory is resolved inside the build's root: a link to a path only the host has is not the host's", async () => {
    mkdirSync(join(hostDir, "only-on-host"));
    try {
      const r = await build("workdir-probe", {
        steps: [
          { type: "WORKDIR", args: ["/probe"] },
          { type: "RUN", args: [`cd / && rmdir /probe && ln -s ${hostDir}/only-on-host /probe`, "root"] },
          { type: "RUN", args: ["pwd > /tmp/probe-cwd", "root"] },
        ],
      });
      // the link dangles in the sandbox, so the step runs in /, whatever the host has at that path
      assert.equal(r.last.status, "ready", JSON.stringify(r.last.reason));
    } finally {
      rmSync(join(hostDir, "only-on-host"), { recursive: true, force: true });
    }
  });

  test("per-team storage: the oldest unused uploads are evicted past the count; an upload larger than the team's quota is refused with the reason as its status text", async () => {
    const q = teamKey(s!, "quota");
    const t = await holder("quota-holder", q);
    for (let i = 0; i < 8; i++) assert.equal((await upload(s!, ca, q, t, `q${i}`, rawTar([{ path: `f${i}`, body: Buffer.from(String(i)) }]))).status, 200);
    assert.equal(readdirSync(filesOf("quota")).filter((n) => n.endsWith(".tar")).length, 6);
    assert.equal((await api(s!, ca, "GET", `/templates/${t}/files/q0`, { key: q })).json.present, false);
    assert.equal((await api(s!, ca, "GET", `/templates/${t}/files/q7`, { key: q })).json.present, true);
    const link = await api(s!, ca, "GET", `/templates/${t}/files/too-big`, { key: q });
    const big = await put(s!, ca, link.json.url, Buffer.alloc(0), 25 * MiB);
    assert.equal(big.status, 400);
    assert.match(big.text, /larger than the team's storage for template files \(25165824 bytes\)/);
    const huge = await put(s!, ca, link.json.url, Buffer.alloc(0), 2 * 1024 * MiB);
    assert.equal(huge.status, 413);
    assert.ok(!readdirSync(filesOf("quota")).some((n) => n.startsWith("too-big")));
  });

  test("a restart sweeps half-received uploads, half-unpacked archives and half-made layers", async () => {
    const d = filesOf("default");
    writeFileSync(join(d, "x.tmp-0badc0de"), "half an upload");
    mkdirSync(join(d, `y.${"0".repeat(64)}.d.tmp-0badc0de`, "sub"), { recursive: true });
    writeFileSync(join(d, `y.${"0".repeat(64)}.d.tmp-0badc0de`, "sub", "f"), "half unpacked");
    mkdirSync(join(dataDir, "templates", "layers", ".tmp-feedface-0badc0de", "diff"), { recursive: true });
    assert.equal(await s!.terminate("SIGKILL"), null);
    s = await start();
    ca = readFileSync(s.caFile);
    assert.deepEqual(walk(join(dataDir, "templates")).filter((n) => n.includes(".tmp-")), []);
  });

  test("PATCH /v2/templates/{id} and /templates/{id}: the CLI publishes and unpublishes; a published template serves other teams; bad bodies 400, another team's 404", async () => {
    const r = await build("pub", { steps: [{ type: "RUN", args: ["echo published > /tmp/pub"] }] });
    assert.equal(r.last.status, "ready", JSON.stringify(r.last.reason));
    const cli = (...args: string[]) =>
      spawnSync(NODE, [join(ROOT, "node_modules", "@e2b", "cli", "dist", "index.js"), ...args], { encoding: "utf8", timeout: 120_000, env: { ...process.env, ...s!.sdkEnv, NO_UPDATE_NOTIFIER: "1", E2B_ACCESS_TOKEN: "" } });
    const createAsMallory = () => api(s!, ca, "POST", "/sandboxes", { body: { templateID: r.templateID, timeout: 30 }, key: mallory });
    assert.equal((await createAsMallory()).status, 403);

    const pub = cli("template", "publish", r.templateID, "-y");
    assert.equal(pub.status, 0, pub.stdout + pub.stderr);
    assert.match(pub.stdout, /Published as: default\/pub/);
    const listed = (await api(s!, ca, "GET", "/templates")).json.find((x: { templateID: string }) => x.templateID === r.templateID);
    assert.equal(listed.public, true);
    const made = await createAsMallory();
    assert.equal(made.status, 201, made.body);
    assert.equal((await api(s!, ca, "DELETE", `/sandboxes/${made.json.sandboxID}`, { key: mallory })).status, 204);

    const unpub = cli("template", "unpublish", r.templateID, "-y");
    assert.equal(unpub.status, 0, unpub.stdout + unpub.stderr);
    assert.equal((await api(s!, ca, "GET", "/templates")).json.find((x: { templateID: string }) => x.templateID === r.templateID).public, false);
    assert.equal((await createAsMallory()).status, 403);

    const patch = (body: unknown, key = s!.apiKey, id = r.templateID) => api(s!, ca, "PATCH", `/v2/templates/${id}`, typeof body === "string" ? { raw: body, key } : { body, key });
    const bad: [unknown, RegExp][] = [
      [{ public: "yes" }, /field "public" must be a boolean, got "yes"/],
      [{ public: true, name: "x" }, /unsupported field\(s\) "name": only "public" can be updated/],
      [[true], /request body must be a JSON object/],
      ["{not json", /not valid JSON/],
    ];
    for (const [body, msg] of bad) {
      const a = await patch(body);
      assert.equal(a.status, 400, JSON.stringify(body));
      assert.match(a.json.message, msg);
    }
    const v2 = await patch({ public: true });
    assert.equal(v2.status, 200, v2.body);
    assert.deepEqual(v2.json, { names: ["default/pub"] });
    assert.equal((await api(s!, ca, "GET", "/templates")).json.find((x: { templateID: string }) => x.templateID === r.templateID).public, true);
    assert.deepEqual((await patch({ public: false })).json, { names: ["default/pub"] });
    assert.equal((await patch({ public: true }, mallory)).status, 404);
    assert.equal((await patch({ public: true }, s!.apiKey, "no-such-template")).status, 404);
    assert.equal((await api(s!, ca, "GET", "/templates")).json.find((x: { templateID: string }) => x.templateID === r.templateID).public, false);
    // v1 (deprecated) makes the same change and answers 200 without a body
    const v1 = await api(s!, ca, "PATCH", `/templates/${r.templateID}`, { body: { public: true } });
    assert.deepEqual([v1.status, v1.body], [200, ""]);
    assert.equal((await api(s!, ca, "GET", "/templates")).json.find((x: { templateID: string }) => x.templateID === r.templateID).public, true);
    assert.equal((await api(s!, ca, "PATCH", `/templates/${r.templateID}`, { body: { public: true }, key: mallory })).status, 404);
  });
});

// Remove, MakeDir and Move working relative to directory handles: the edges of that walk (what a
// path may name, links, depth, the event loop during a big removal) and a daemon that runs
// without its native addon, which must refuse a tree removal rather than do it by path.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, copyFileSync, existsSync, lchownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Filesystem } from "../../../src/envd/gen/filesystem/filesystem_pb.js";
import { ENVD_BUNDLE, ENVD_REST_BUNDLE, ROOT, startDaemon, type Daemon } from "../helpers/daemon.js";
import { basicAuth, clients, tempDir } from "../helpers/clients.js";

let d: Daemon;
let work: { path: string; cleanup(): void };
let fs: ReturnType<typeof clients>["fs"]["json"];
const user = { headers: basicAuth("user") };
/** The sandbox user's uid (1001 on the test host; whatever useradd gave it elsewhere). */
const USER = Number(execFileSync("id", ["-u", "user"], { encoding: "utf8" }).trim());

before(async () => {
  d = await startDaemon();
  fs = clients(d.url).fs.json;
  work = await tempDir("sec-edges");
  chownSync(work.path, USER, USER);
});

after(async () => {
  work.cleanup();
  await d.stop();
});

async function rejectsWith(p: Promise<unknown>, code: Code, message?: RegExp): Promise<void> {
  const err = await p.then(
    () => assert.fail(`expected ${Code[code]}`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ConnectError, String(err));
  assert.equal(err.code, code, `${Code[err.code]}: ${err.rawMessage}`);
  if (message) assert.match(err.rawMessage, message);
}

test("Remove refuses paths that name no entry ('/', '.', '..') and keeps what they lead to", async () => {
  const dir = join(work.path, "names");
  mkdirSync(join(dir, "sub"), { recursive: true });
  await rejectsWith(fs.remove({ path: "/" }, user), Code.InvalidArgument, /does not name a file or directory/);
  await rejectsWith(fs.remove({ path: "///" }, user), Code.InvalidArgument);
  await rejectsWith(fs.remove({ path: join(dir, "sub") + "/." }, user), Code.InvalidArgument);
  await rejectsWith(fs.remove({ path: join(dir, "sub") + "/.." }, user), Code.InvalidArgument);
  assert.ok(statSync(join(dir, "sub")).isDirectory());
  // A trailing slash names the directory itself.
  await fs.remove({ path: join(dir, "sub") + "//" }, user);
  assert.equal(existsSync(join(dir, "sub")), false);
  await fs.remove({ path: join(dir, "never", "was") }, user);
  writeFileSync(join(dir, "file"), "x");
  await rejectsWith(fs.remove({ path: join(dir, "file", "below") }, user), Code.Internal, /error removing file or directory: open .*file: not a directory/);
  rmSync(dir, { recursive: true, force: true });
});

test("Remove of a tree removes root-owned entries in it, links as links, and trees deeper than a path can name", async () => {
  const dir = join(work.path, "deep");
  const keep = mkdtempSync(join(tmpdir(), "envd-keep-"));
  try {
    writeFileSync(join(keep, "kept"), "kept");
    let p = join(dir, "t");
    mkdirSync(p, { recursive: true });
    symlinkSync(keep, join(p, "to-keep"));
    symlinkSync(join(keep, "kept"), join(p, "to-kept"));
    // Deeper than PATH_MAX from the top: made by walking down with relative paths.
    const script = 'const fs = require("node:fs"); process.chdir(process.argv[1]); for (let i = 0; i < 1500; i++) { fs.mkdirSync("dddd"); process.chdir("dddd"); } fs.writeFileSync("f", "end");';
    const deep = spawn(process.execPath, ["-e", script, p], { stdio: "inherit" });
    assert.equal(await new Promise((r) => deep.once("exit", r)), 0);
    writeFileSync(join(p, "root-file"), "r", { mode: 0o600 });
    await fs.remove({ path: join(dir, "t") }, user);
    assert.equal(existsSync(join(dir, "t")), false);
    assert.equal(readFileSync(join(keep, "kept"), "utf8"), "kept");
  } finally {
    rmSync(keep, { recursive: true, force: true });
    execFileSync("rm", ["-rf", dir]); // coreutils walks trees deeper than PATH_MAX

  }
});

test("a big Remove runs off the event loop: /health answers while it is under way", async () => {
  const dir = join(work.path, "big");
  for (let i = 0; i < 40; i++) {
    mkdirSync(join(dir, `d${i}`), { recursive: true });
    for (let j = 0; j < 250; j++) writeFileSync(join(dir, `d${i}`, `f${j}`), "");
  }
  let removed = false;
  const removal = fs.remove({ path: dir }, user).then(() => (removed = true));
  await new Promise((r) => setTimeout(r, 30));
  const res = await fetch(`${d.url}/health`);
  const answeredFirst = !removed;
  await removal;
  assert.ok(res.status < 300, `health ${res.status}`);
  assert.ok(answeredFirst, "/health waited for the removal");
  assert.equal(existsSync(dir), false);
});

test("MakeDir and Move still follow links in directories that already exist, as the request names them", async () => {
  const dir = join(work.path, "follow");
  mkdirSync(join(dir, "real"), { recursive: true });
  symlinkSync(join(dir, "real"), join(dir, "via"));
  const made = await fs.makeDir({ path: join(dir, "via", "new", "deeper") }, user);
  assert.equal(made.entry?.path, join(dir, "via", "new", "deeper"));
  assert.equal(statSync(join(dir, "real", "new", "deeper")).uid, USER);
  assert.equal(statSync(join(dir, "real", "new")).uid, USER);
  writeFileSync(join(dir, "src"), "moved");
  await fs.move({ source: join(dir, "src"), destination: join(dir, "via", "other", "dst") }, user);
  assert.equal(readFileSync(join(dir, "real", "other", "dst"), "utf8"), "moved");
  assert.equal(statSync(join(dir, "real", "other")).uid, USER);
  await rejectsWith(fs.move({ source: join(dir, "real"), destination: "/" }, user), Code.InvalidArgument, /does not name/);
  await rejectsWith(fs.move({ source: join(dir, "nope"), destination: join(dir, "x") }, user), Code.NotFound, /source file not found: rename .*nope .*x: no such file or directory/);
  rmSync(dir, { recursive: true, force: true });
});

test("without the native addon, a tree removal and creating directories for a user are refused, not done by path", async () => {
  // The two bundles alone in a directory where no addon is found (its lookup: beside the script,
  // build output above it or the working directory, /usr/lib/envd).
  const alone = mkdtempSync(join(tmpdir(), "envd-noaddon-"));
  copyFileSync(ENVD_BUNDLE, join(alone, "envd"));
  copyFileSync(ENVD_REST_BUNDLE, join(alone, "envd-rest.cjs"));
  writeFileSync(join(alone, "package.json"), '{"type":"commonjs"}');
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_PATH: join(ROOT, "node_modules") };
  delete env.ENVD_ADDON_DIR;
  const args = ["--port", "0", "--default-user", "user", "--default-workdir", "/home/user", "--clock", "off", "--run-dir", join(alone, "run"), "--hosts-file", join(alone, "hosts"), "--ca-bundle", join(alone, "ca.crt"), "--ca-cert", join(alone, "e2b.crt")];
  const proc = spawn(process.execPath, [join(alone, "envd"), ...args], { cwd: alone, env, stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise((r) => proc.once("exit", r));
  let out = "";
  proc.stdout!.setEncoding("utf8").on("data", (c: string) => (out += c));
  proc.stderr!.setEncoding("utf8").on("data", (c: string) => (out += c));
  const dir = join(work.path, "noaddon");
  try {
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setInterval(() => {
        const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(out);
        if (m) resolve(Number(m[1]));
        if (m || proc.exitCode !== null) clearInterval(timer);
        if (proc.exitCode !== null) reject(new Error(`exited: ${out}`));
      }, 20);
    });
    const bare = createClient(Filesystem, createConnectTransport({ baseUrl: `http://127.0.0.1:${port}`, httpVersion: "1.1" }));
    mkdirSync(join(dir, "tree", "sub"), { recursive: true });
    writeFileSync(join(dir, "tree", "sub", "f"), "x");
    mkdirSync(join(dir, "empty"));
    writeFileSync(join(dir, "file"), "x");
    symlinkSync(join(dir, "tree"), join(dir, "link"));
    await rejectsWith(bare.remove({ path: join(dir, "tree") }, user), Code.FailedPrecondition, /needs envd's native addon/);
    assert.ok(existsSync(join(dir, "tree", "sub", "f")));
    await bare.remove({ path: join(dir, "empty") }, user);
    await bare.remove({ path: join(dir, "file") }, user);
    await bare.remove({ path: join(dir, "link") + "/" }, user);
    assert.equal(existsSync(join(dir, "empty")) || existsSync(join(dir, "file")), false);
    assert.throws(() => lstatSync(join(dir, "link")), /ENOENT/);
    assert.ok(existsSync(join(dir, "tree", "sub", "f")), "the link's target stays");
    await rejectsWith(bare.makeDir({ path: join(dir, "new", "dir") }, user), Code.FailedPrecondition, /needs envd's native addon/);
    assert.equal(existsSync(join(dir, "new")), false);
    await rejectsWith(bare.makeDir({ path: join(dir, "tree") }, user), Code.AlreadyExists);
    await bare.makeDir({ path: join(dir, "byroot", "dir") }, { headers: basicAuth("root") });
    assert.equal(statSync(join(dir, "byroot", "dir")).uid, 0);
  } finally {
    if (proc.exitCode === null) proc.kill("SIGTERM");
    await exited;
    rmSync(alone, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a link the user planted to root's directory carries no MakeDir, Move, upload or Remove of theirs there; root's links and the user's own still lead", async () => {
  const secret = mkdtempSync(join(tmpdir(), "envd-root-secret-"));
  const dir = join(work.path, "planted-live");
  try {
    chmodSync(secret, 0o700);
    writeFileSync(join(secret, "secret"), "root's data", { mode: 0o644 });
    const list = () => readdirSync(secret).sort().join(",");
    mkdirSync(dir);
    chownSync(dir, USER, USER);
    const link = join(dir, "link");
    symlinkSync(secret, link);
    lchownSync(link, USER, USER);
    const denied = /a link on the way to .* leads where the user may not write/;
    await rejectsWith(fs.makeDir({ path: join(link, "new", "deeper") }, user), Code.PermissionDenied, denied);
    const src = join(dir, "src");
    writeFileSync(src, "moved");
    await rejectsWith(fs.move({ source: src, destination: join(link, "moved") }, user), Code.PermissionDenied, denied);
    await rejectsWith(fs.remove({ path: join(link, "secret") }, user), Code.PermissionDenied, denied);
    await rejectsWith(fs.move({ source: join(link, "secret"), destination: join(dir, "taken") }, user), Code.PermissionDenied, denied);
    assert.equal(existsSync(join(dir, "taken")), false);
    const up = await fetch(`${d.url}/files?${new URLSearchParams({ path: join(link, "new", "up.txt"), username: "user" })}`, {
      method: "POST",
      body: "uploaded",
      headers: { "content-type": "application/octet-stream" },
    });
    // Uploads act as the user: the kernel refuses the user's mkdir there before envd's own walk would.
    assert.equal(up.status, 403, `upload answered ${up.status}`);
    assert.match(await up.text(), /permission denied for user 'user'|a link on the way to .* leads where the user may not write/);
    assert.equal(list(), "secret");
    assert.equal(statSync(secret).mode & 0o777, 0o700);
    assert.equal(readFileSync(join(secret, "secret"), "utf8"), "root's data");
    assert.equal(statSync(join(secret, "secret")).uid, 0);
    assert.equal(statSync(secret).uid, 0);
    // A sticky directory the user may write: only the user's own entries may be removed there.
    const sticky = join(secret, "sticky");
    mkdirSync(sticky);
    chmodSync(sticky, 0o1777);
    chmodSync(secret, 0o755);
    writeFileSync(join(sticky, "roots"), "r");
    writeFileSync(join(sticky, "users"), "u");
    chownSync(join(sticky, "users"), USER, USER);
    symlinkSync(sticky, join(dir, "to-sticky"));
    lchownSync(join(dir, "to-sticky"), USER, USER);
    await rejectsWith(fs.remove({ path: join(dir, "to-sticky", "roots") }, user), Code.PermissionDenied, denied);
    await fs.remove({ path: join(dir, "to-sticky", "users") }, user);
    assert.deepEqual(readdirSync(sticky), ["roots"]);
    // Root's request goes where the link leads, as named.
    await fs.makeDir({ path: join(link, "byroot") }, { headers: basicAuth("root") });
    assert.equal(statSync(join(secret, "byroot")).uid, 0);
    // The user's own link to a directory of theirs leads there.
    mkdirSync(join(dir, "own"));
    chownSync(join(dir, "own"), USER, USER);
    symlinkSync(join(dir, "own"), join(dir, "own-link"));
    lchownSync(join(dir, "own-link"), USER, USER);
    await fs.makeDir({ path: join(dir, "own-link", "x", "y") }, user);
    assert.equal(statSync(join(dir, "own", "x", "y")).uid, USER);
    await fs.move({ source: src, destination: join(dir, "own-link", "x", "moved") }, user);
    await fs.remove({ path: join(dir, "own-link", "x") }, user);
    assert.equal(existsSync(join(dir, "own", "x")), false);
  } finally {
    rmSync(secret, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  }
});

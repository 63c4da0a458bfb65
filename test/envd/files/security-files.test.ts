// Uploads and compose act for the request's user: whatever links that user planted, they reach
// only what the user could reach (the kernel checks, with the user's filesystem ids). FIFOs and
// devices never block the daemon, a write signature without a path stays inside the user's home,
// and compose never loses its destination to a source that is the same file.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, closeSync, constants, existsSync, lchownSync, linkSync, mkdirSync, openSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { clients, sdkSandbox, tempDir } from "../helpers/clients.js";

const TOKEN = "tok-secfiles-5c1e";
let d: Daemon;
let dir: { path: string; cleanup(): void };
let rootDir: string;
let secret: string;
const fifos: string[] = [];

before(async () => {
  rootDir = join("/tmp", `envd-secfiles-root-${process.pid}`);
  mkdirSync(rootDir, { mode: 0o700 });
  chmodSync(rootDir, 0o700);
  secret = join(rootDir, "secret");
  writeFileSync(secret, "root secret");
  chmodSync(secret, 0o600);
  dir = await tempDir("secfiles");
  d = await startDaemon();
  assert.equal((await fetch(`${d.url}/init`, { method: "POST", body: JSON.stringify({ accessToken: TOKEN }) })).status, 204);
});

after(async () => {
  // A daemon that blocked in open() on a FIFO is released by a writer showing up.
  for (const f of fifos) {
    try {
      closeSync(openSync(f, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // no reader left: nothing blocked on it
    }
  }
  await d?.stop();
  dir?.cleanup();
  rmSync(rootDir, { recursive: true, force: true });
});

const auth = { "x-access-token": TOKEN };

/** What the user planted: a link owned by `user` (uid 1001), as a process of the sandbox makes it. */
function plantLink(target: string, at: string): string {
  symlinkSync(target, at);
  lchownSync(at, 1001, 1001);
  return at;
}

/** Content, owner and mode of a file, to show it is untouched. */
function snapshot(path: string): string {
  const st = statSync(path);
  return `${readFileSync(path, "utf8")}|${st.uid}:${st.gid}|${(st.mode & 0o7777).toString(8)}|${st.ino}`;
}

function upload(path: string, body: string, username?: string) {
  const q = new URLSearchParams({ path });
  if (username) q.set("username", username);
  return fetch(`${d.url}/files?${q}`, { method: "POST", body, headers: { ...auth, "content-type": "application/octet-stream" } });
}

function multipart(filename: string, data: string): { body: Uint8Array<ArrayBuffer>; type: string } {
  const b = "SECFILESBOUNDARY";
  const text = `--${b}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n${data}\r\n--${b}--\r\n`;
  return { body: new Uint8Array(Buffer.from(text)), type: `multipart/form-data; boundary=${b}` };
}

function compose(sources: string[], destination: string) {
  return fetch(`${d.url}/files/compose`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ source_paths: sources, destination }) });
}

async function refused(r: Response, status: number, message: RegExp): Promise<void> {
  const text = await r.text();
  assert.equal(r.status, status, text);
  assert.match(JSON.parse(text).message, message);
}

test("an upload onto a link the user planted to a root-only file is refused; the file is untouched", async () => {
  const before = snapshot(secret);
  const link = plantLink(secret, join(dir.path, "innocent.txt"));
  await refused(await upload(link, "overwritten by the user"), 403, /permission denied for user 'user'/);
  const form = multipart(link, "overwritten through multipart");
  await refused(await fetch(`${d.url}/files`, { method: "POST", body: form.body, headers: { ...auth, "content-type": form.type } }), 403, /permission denied for user 'user'/);
  const sbx = await sdkSandbox(d.url, { envdAccessToken: TOKEN });
  await assert.rejects(sbx.files.write(link, "through the SDK"), /permission denied for user 'user'/);
  assert.equal(snapshot(secret), before, "the root file keeps content, owner, mode and inode");
  // As root the request is root's own: it writes through the link, as it always did.
  const other = join(rootDir, "root-target");
  writeFileSync(other, "old");
  const rootLink = plantLink(other, join(dir.path, "root-link.txt"));
  assert.equal((await upload(rootLink, "written by root", "root")).status, 200);
  assert.equal(readFileSync(other, "utf8"), "written by root");
});

test("a dangling link, or a linked directory, into a root-only directory creates nothing there", async () => {
  const dangling = plantLink(join(rootDir, "created-by-user"), join(dir.path, "dangling.txt"));
  await refused(await upload(dangling, "planted"), 403, /permission denied for user 'user'/);
  assert.equal(existsSync(join(rootDir, "created-by-user")), false);
  const dirLink = plantLink(rootDir, join(dir.path, "rootdir"));
  await refused(await upload(join(dirLink, "through-dir.txt"), "planted"), 403, /permission denied for user 'user'/);
  await refused(await upload(join(dirLink, "newdir", "deep.txt"), "planted"), 403, /^error ensuring directories: permission denied for user 'user'/);
  assert.equal(existsSync(join(rootDir, "through-dir.txt")), false);
  assert.equal(existsSync(join(rootDir, "newdir")), false);
  // The user's own files through the user's own links are written as before, owned by the user.
  mkdirSync(join(dir.path, "mine"));
  lchownSync(join(dir.path, "mine"), 1001, 1001);
  const ownLink = plantLink(join(dir.path, "mine"), join(dir.path, "mine-link"));
  assert.equal((await upload(join(ownLink, "a", "ok.txt"), "fine")).status, 200);
  const st = statSync(join(dir.path, "mine", "a", "ok.txt"));
  assert.equal(`${st.uid}:${st.gid}`, "1001:1001");
  assert.equal(statSync(join(dir.path, "mine", "a")).uid, 1001);
});

test("compose reads sources as the user: a link to a root file, or the root file itself, is refused and kept", async () => {
  const before = snapshot(secret);
  const srcLink = plantLink(secret, join(dir.path, "part-link"));
  const out = join(dir.path, "composed.txt");
  await refused(await compose([srcLink], out), 403, /permission denied for user 'user'/);
  await refused(await compose([secret], out), 403, /permission denied for user 'user'/);
  assert.equal(existsSync(out), false, "no copy of the root file for the user");
  assert.equal(snapshot(secret), before, "compose deletes its sources: the root file must survive");
  // A destination in a root-only directory is refused as well.
  const mine = join(dir.path, "mine-part");
  writeFileSync(mine, "mine");
  lchownSync(mine, 1001, 1001);
  await refused(await compose([mine], join(rootDir, "composed")), 403, /permission denied for user 'user'/);
  assert.equal(existsSync(join(rootDir, "composed")), false);
  assert.equal(readFileSync(mine, "utf8"), "mine");
});

test("compose refuses a source that is the destination under another name and loses no data", async () => {
  const dest = join(dir.path, "dest.txt");
  writeFileSync(dest, "precious");
  lchownSync(dest, 1001, 1001);
  const hard = join(dir.path, "dest-hardlink.txt");
  linkSync(dest, hard);
  const spellings = [join(dir.path, ".", "dest.txt"), `${dir.path}//dest.txt`, hard];
  for (const s of spellings) {
    await refused(await compose([s], dest), 400, /cannot be the same as destination/);
    assert.equal(readFileSync(dest, "utf8"), "precious", s);
  }
  assert.equal(readFileSync(hard, "utf8"), "precious");
});

test("FIFOs: downloads and uploads answer 400 at once, and five of them leave the daemon serving", async () => {
  const fifo = join(dir.path, "pipe");
  execFileSync("mkfifo", [fifo]);
  execFileSync("chown", ["1001:1001", fifo]);
  fifos.push(fifo);
  const get = (p: string) => fetch(`${d.url}/files?path=${encodeURIComponent(p)}`, { headers: auth, signal: AbortSignal.timeout(4000) });
  await refused(await get(fifo), 400, /is not a regular file/);
  const up = await fetch(`${d.url}/files?path=${encodeURIComponent(fifo)}`, { method: "POST", body: "x", headers: { ...auth, "content-type": "application/octet-stream" }, signal: AbortSignal.timeout(4000) });
  await refused(up, 400, /is not a regular file/);
  assert.equal(statSync(fifo).uid, 1001, "the FIFO was not handed to anyone");

  const downloads = Array.from({ length: 5 }, () => get(fifo).then((r) => r.status, () => "stalled"));
  const c = clients(d.url);
  const started = Date.now();
  const st = await c.fs.json.stat({ path: dir.path }, { headers: auth, timeoutMs: 3000 });
  assert.equal(st.entry?.path, dir.path);
  assert.equal((await fetch(`${d.url}/health`, { signal: AbortSignal.timeout(3000) })).status, 204);
  assert.ok(Date.now() - started < 3000, "Stat and /health answered promptly");
  assert.deepEqual(await Promise.all(downloads), [400, 400, 400, 400, 400]);
});

test("a write signature without a path lets multipart filenames land only inside the user's home", async () => {
  const sbx = await sdkSandbox(d.url, { envdAccessToken: TOKEN });
  const url = await sbx.uploadUrl();
  assert.equal(new URL(url).searchParams.get("path"), null, "the SDK signs no path");
  const post = (filename: string) => {
    const form = multipart(filename, "via a path-less signed URL");
    return fetch(url, { method: "POST", body: form.body, headers: { "content-type": form.type } });
  };
  // Outside home but writable by the user: only the signature's scope can refuse it.
  const escaped = join(dir.path, "escaped.txt");
  await refused(await post(escaped), 403, /only allows uploads into the home directory of user 'user'/);
  await refused(await post(`../..${escaped}`), 403, /only allows uploads into the home directory/);
  await refused(await post(`/home/user/../..${escaped}`), 403, /only allows uploads into the home directory/);
  assert.equal(existsSync(escaped), false);
  const name = `envd-secfiles-${process.pid}.txt`;
  try {
    const ok = await post(name);
    assert.equal(ok.status, 200, await ok.clone().text());
    assert.deepEqual(await ok.json(), [{ path: join("/home/user", name), name, type: "file" }]);
    assert.equal(statSync(join("/home/user", name)).uid, 1001);
  } finally {
    rmSync(join("/home/user", name), { force: true });
  }
});

test("after acting for users, the daemon's pool threads are its own again (root reads stay root)", async () => {
  // Uploads as the user switch a pool thread's ids for each call and back; downloads are the daemon's.
  const denied = Array.from({ length: 24 }, (_, i) => upload(join(rootDir, `nope-${i}`), "x").then((r) => r.status));
  const reads = Array.from({ length: 24 }, () =>
    fetch(`${d.url}/files?path=${encodeURIComponent(secret)}`, { headers: auth }).then(async (r) => `${r.status} ${await r.text()}`),
  );
  assert.deepEqual(new Set(await Promise.all(denied)), new Set([403]));
  assert.deepEqual(new Set(await Promise.all(reads)), new Set(["200 root secret"]));
});

// Missing parent directories of a write are made for the request's user wherever E2B makes them,
// `/` included (E2B's own `write multiple files` writes /0/multi_test_file0.txt as `user`), owned
// by that user; the file itself is written as the user. What a process of the user can plant (a
// link on the way) never makes envd create anything where the user could not, and directories
// that already exist keep their owner. Driven through the published SDK in debug mode.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, lchownSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { sdkSandbox, tempDir } from "../helpers/clients.js";

/** The sandbox user's uid and gid (1001 on the test host; whatever useradd gave it elsewhere). */
const USER = Number(execFileSync("id", ["-u", "user"], { encoding: "utf8" }).trim());
const USER_GID = Number(execFileSync("id", ["-g", "user"], { encoding: "utf8" }).trim());
/** Directories at the filesystem root are shared by everything on the host: each name is this run's own. */
const TAG = `envd-parents-${process.pid}`;

type Sbx = Awaited<ReturnType<typeof sdkSandbox>>;
let d: Daemon;
let sbx: Sbx;
let work: { path: string; cleanup(): void };
const made: string[] = [];

/** A path at the filesystem root for this run, removed afterwards. */
function atRoot(name: string): string {
  const p = `/${TAG}-${name}`;
  made.push(p);
  return p;
}

before(async () => {
  d = await startDaemon();
  sbx = await sdkSandbox(d.url);
  work = await tempDir("parents");
  chownSync(work.path, USER, USER_GID);
});

after(async () => {
  for (const p of made) rmSync(p, { recursive: true, force: true });
  work?.cleanup();
  await d?.stop();
});

/** Owner and permission bits, as "uid:gid mode". */
function owner(path: string): string {
  const st = statSync(path);
  return `${st.uid}:${st.gid} ${(st.mode & 0o7777).toString(8)}`;
}

const mine = `${USER}:${USER_GID}`;

test("write multiple files (E2B's upstream case): parents missing at / are made, owned by the user, and so are the files", async () => {
  const files = Array.from({ length: 10 }, (_, i) => ({
    // As upstream: even files under a new directory at the filesystem root, odd ones in home.
    path: i % 2 === 0 ? join(atRoot(String(i)), `multi_test_file${i}.txt`) : join("/home/user", TAG, `multi_test_file${i}.txt`),
    data: `This is a test file ${i}.`,
  }));
  made.push(join("/home/user", TAG));
  const infos = await sbx.files.write(files);
  assert.equal(infos.length, files.length);
  for (const [i, f] of files.entries()) {
    assert.equal(infos[i]!.name, `multi_test_file${i}.txt`);
    assert.equal(infos[i]!.path, f.path);
    assert.equal(await sbx.files.exists(f.path), true);
    assert.equal(await sbx.files.read(f.path), f.data);
    assert.equal(owner(f.path), `${mine} 644`, f.path);
    if (i % 2 === 0) assert.equal(owner(join(f.path, "..")), `${mine} 755`, `the new parent of ${f.path}`);
  }
  assert.equal(owner("/"), "0:0 755", "the filesystem root keeps its owner");
});

test("nested missing parents are each made for the user, by the raw upload and the multipart form alike", async () => {
  const top = atRoot("nested");
  await sbx.files.write(join(top, "a", "b", "c", "raw.txt"), "raw", { useOctetStream: true });
  await sbx.files.write([{ path: join(top, "m", "n", "form.txt"), data: "form" }]);
  for (const dir of [top, join(top, "a"), join(top, "a", "b"), join(top, "a", "b", "c"), join(top, "m"), join(top, "m", "n")]) {
    assert.equal(owner(dir), `${mine} 755`, dir);
  }
  assert.equal(owner(join(top, "a", "b", "c", "raw.txt")), `${mine} 644`);
  assert.equal(await sbx.files.read(join(top, "m", "n", "form.txt")), "form");
  // MakeDir, as the reference: the directory and its missing parents, the user's.
  const rpc = atRoot("makedir");
  assert.equal(await sbx.files.makeDir(join(rpc, "x", "y")), true);
  assert.equal(owner(rpc), `${mine} 755`);
  assert.equal(owner(join(rpc, "x", "y")), `${mine} 755`);
});

test("compose makes its destination's missing parents at / for the user as well", async () => {
  const part = join(work.path, "part.txt");
  await sbx.files.write(part, "composed");
  const out = join(atRoot("compose"), "x", "out.txt");
  const r = await fetch(`${d.url}/files/compose`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ source_paths: [part], destination: out }),
  });
  assert.equal(r.status, 200, await r.clone().text());
  assert.equal(await sbx.files.read(out), "composed");
  assert.equal(owner(join(out, "..", "..")), `${mine} 755`);
  assert.equal(owner(join(out, "..")), `${mine} 755`);
  assert.equal(statSync(out).uid, USER);
});

test("directories that already exist keep their owner; the file itself is written as the user", async () => {
  const kept = atRoot("kept");
  mkdirSync(join(kept, "other"), { recursive: true, mode: 0o755 });
  chownSync(join(kept, "other"), 4242, 4242);
  await sbx.files.write(join(kept, "other", "new", "deeper", "f.txt"), "x");
  await sbx.files.write([{ path: join(kept, "other", "new2", "g.txt"), data: "y" }]);
  assert.equal(owner(kept), "0:0 755");
  assert.equal(owner(join(kept, "other")), "4242:4242 755");
  assert.equal(owner(join(kept, "other", "new")), `${mine} 755`);
  assert.equal(owner(join(kept, "other", "new", "deeper", "f.txt")), `${mine} 644`);
  assert.equal(owner(join(kept, "other", "new2")), `${mine} 755`);
  // A second write through the same, now existing, parents changes none of them.
  await sbx.files.write(join(kept, "other", "new", "deeper", "f2.txt"), "z");
  assert.equal(owner(join(kept, "other")), "4242:4242 755");
  // Into root's existing directory the file is the user's own write: refused, as the kernel says.
  await assert.rejects(sbx.files.write(join(kept, "direct.txt"), "no"), /permission denied for user 'user'/);
  assert.deepEqual(readdirSync(kept), ["other"]);
});

test("where the user cannot even look (root's 0700 home) nothing is made for them", async () => {
  const inRoot = join("/root", `${TAG}-hidden`);
  await assert.rejects(sbx.files.write(join(inRoot, "f.txt"), "no"), /permission denied for user 'user'/);
  await assert.rejects(sbx.files.write([{ path: join(inRoot, "g.txt"), data: "no" }]), /permission denied for user 'user'/);
  assert.equal(existsSync(inRoot), false);
});

test("a link the user planted to a root-owned directory (or to /) makes nothing there, at the end of the path or in its middle", async () => {
  const rootDir = atRoot("rootdir");
  mkdirSync(join(rootDir, "sub"), { recursive: true, mode: 0o755 });
  const plant = (target: string, name: string) => {
    const at = join(work.path, name);
    symlinkSync(target, at);
    lchownSync(at, USER, USER_GID);
    return at;
  };
  const toRoot = plant(rootDir, "to-root");
  const toSlash = plant("/", "to-slash");
  const viaSlash = `${TAG}-via-link`;
  made.push(`/${viaSlash}`);
  // The user's own mkdir is refused there, and so is envd's, past the user's link.
  const denied = /permission denied for user 'user': a link on the way to .* leads where the user may not write/;
  await assert.rejects(sbx.files.write(join(toRoot, "new", "f.txt"), "no"), denied);
  await assert.rejects(sbx.files.write(join(toRoot, "new", "f.txt"), "no", { useOctetStream: true }), denied);
  await assert.rejects(sbx.files.write(join(toRoot, "sub", "new", "deeper", "f.txt"), "no"), denied);
  await assert.rejects(sbx.files.write(join(toSlash, viaSlash, "f.txt"), "no", { useOctetStream: true }), denied);
  // In the multi-file form, beside a file the user may write (which is written).
  await assert.rejects(
    sbx.files.write([
      { path: join(work.path, "own", "ok.txt"), data: "ok" },
      { path: join(toSlash, viaSlash, "g.txt"), data: "no" },
    ]),
    denied,
  );
  assert.equal(owner(join(work.path, "own", "ok.txt")), `${mine} 644`);
  // MakeDir through the same links.
  await assert.rejects(sbx.files.makeDir(join(toRoot, "new")), /leads where the user may not write/);
  await assert.rejects(sbx.files.makeDir(join(toSlash, viaSlash)), /leads where the user may not write/);
  assert.deepEqual(readdirSync(rootDir), ["sub"]);
  assert.deepEqual(readdirSync(join(rootDir, "sub")), []);
  assert.equal(owner(rootDir), "0:0 755");
  assert.equal(existsSync(`/${viaSlash}`), false);
});

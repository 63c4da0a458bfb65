import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { chownSync, existsSync, mkdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import xattr from "@napi-rs/xattr";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { sdkSandbox, tempDir } from "../helpers/clients.js";

type Sbx = Awaited<ReturnType<typeof sdkSandbox>>;

let d: Daemon;
let sbx: Sbx;
let dir: { path: string; cleanup(): void };

before(async () => {
  d = await startDaemon();
  sbx = await sdkSandbox(d.url);
  dir = await tempDir("fs-sdk");
});

after(async () => {
  dir.cleanup();
  await d.stop();
});

const e2b = () => import("e2b");

test("files.list: depth 1 and 2, lexical pre-order, root excluded", async () => {
  const root = join(dir.path, "list");
  for (const p of ["subdir1/subdir1_1", "subdir1/subdir1_2", "subdir2/subdir2_1"]) mkdirSync(join(root, p), { recursive: true });
  writeFileSync(join(root, "file1.txt"), "x");
  writeFileSync(join(root, "subdir1/subdir1_1/deep.txt"), "");
  const one = await sbx.files.list(root);
  assert.deepEqual(
    one.map((e) => e.name),
    ["file1.txt", "subdir1", "subdir2"],
  );
  const two = await sbx.files.list(root, { depth: 2 });
  assert.deepEqual(
    two.map((e) => e.path.slice(root.length + 1)),
    ["file1.txt", "subdir1", "subdir1/subdir1_1", "subdir1/subdir1_2", "subdir2", "subdir2/subdir2_1"],
  );
  const deep = await sbx.files.list(root, { depth: 50 });
  assert.ok(deep.some((e) => e.path === join(root, "subdir1/subdir1_1/deep.txt")));
  const file = one[0];
  assert.equal(file.type, "file");
  assert.equal(file.size, 1);
  assert.equal(one[1].type, "dir");
  const { FileNotFoundError } = await e2b();
  await assert.rejects(sbx.files.list(join(root, "missing")), FileNotFoundError);
});

test("files.exists and getInfo: file, dir and symlink", async () => {
  const base = join(dir.path, "info");
  mkdirSync(base);
  chownSync(base, 1001, 1001);
  const file = join(base, "f.txt");
  await sbx.files.write(file, "hello");
  assert.equal(await sbx.files.exists(file), true);
  assert.equal(await sbx.files.exists(join(base, "nope")), false);
  const info = await sbx.files.getInfo(file);
  assert.equal(info.name, "f.txt");
  assert.equal(info.type, "file");
  assert.equal(info.path, file);
  assert.equal(info.size, 5);
  assert.equal(info.mode, 0o644);
  assert.equal(info.permissions, "-rw-r--r--");
  assert.equal(info.owner, "user");
  assert.equal(info.group, "user");
  assert.ok(info.modifiedTime instanceof Date);
  assert.ok(Math.abs(info.modifiedTime.getTime() - statSync(file).mtimeMs) < 2);
  assert.equal(info.symlinkTarget, undefined);

  await sbx.files.makeDir(join(base, "d"));
  const dirInfo = await sbx.files.getInfo(join(base, "d"));
  assert.equal(dirInfo.type, "dir");
  assert.equal(dirInfo.mode, 0o755);
  assert.equal(dirInfo.permissions, "drwxr-xr-x");
  assert.equal(dirInfo.owner, "user");

  symlinkSync("f.txt", join(base, "rel-link"));
  const link = await sbx.files.getInfo(join(base, "rel-link"));
  assert.equal(link.type, "file", "type of the target");
  assert.equal(link.symlinkTarget, file, "absolute resolved target");
  assert.equal(link.permissions, "Lrwxrwxrwx");
  const { FileNotFoundError } = await e2b();
  await assert.rejects(sbx.files.getInfo(join(base, "nope")), FileNotFoundError);
});

test("files.getInfo shows user.e2b.* xattrs set out of band, and ignores other user.* ones", async () => {
  const file = join(dir.path, "meta.txt");
  writeFileSync(file, "m");
  await xattr.setAttribute(file, "user.e2b.author", "ada");
  await xattr.setAttribute(file, "user.e2b.purpose", "tests ✓");
  await xattr.setAttribute(file, "user.other", "hidden");
  const info = await sbx.files.getInfo(file);
  assert.deepEqual((info as unknown as { metadata?: Record<string, string> }).metadata, { author: "ada", purpose: "tests ✓" });
  const plain = join(dir.path, "plain.txt");
  writeFileSync(plain, "");
  assert.equal((await sbx.files.getInfo(plain) as unknown as { metadata?: unknown }).metadata, undefined);
});

test("files.makeDir true then false; rename; remove (missing is fine)", async () => {
  const base = join(dir.path, "mut");
  assert.equal(await sbx.files.makeDir(join(base, "a/b")), true);
  assert.equal(await sbx.files.makeDir(join(base, "a/b")), false);
  assert.equal(statSync(join(base, "a/b")).uid, 1001, "owned by the default user");
  await sbx.files.write(join(base, "a/b/f.txt"), "r");
  const moved = await sbx.files.rename(join(base, "a/b/f.txt"), join(base, "c/g.txt"));
  assert.equal(moved.path, join(base, "c/g.txt"));
  assert.equal(moved.name, "g.txt");
  assert.equal(moved.type, "file");
  assert.ok(!existsSync(join(base, "a/b/f.txt")));
  const { FileNotFoundError } = await e2b();
  await assert.rejects(sbx.files.rename(join(base, "none"), join(base, "x")), FileNotFoundError);
  await sbx.files.remove(join(base, "a"));
  assert.ok(!existsSync(join(base, "a")));
  await sbx.files.remove(join(base, "never-was"));
  await sbx.files.remove(join(base, "c/g.txt"));
  assert.equal(await sbx.files.exists(join(base, "c/g.txt")), false);
});

test("relative paths resolve under /home/user for the default user", async () => {
  const rel = `envd-fs-sdk-${process.pid}`;
  try {
    assert.equal(await sbx.files.makeDir(rel), true);
    const info = await sbx.files.getInfo(rel);
    assert.equal(info.path, `/home/user/${rel}`);
    assert.equal(info.owner, "user");
  } finally {
    await sbx.files.remove(rel);
  }
  assert.ok(!existsSync(`/home/user/${rel}`));
});

import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { chownSync, existsSync, lstatSync, mkdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { FileType } from "../../../src/envd/gen/filesystem/filesystem_pb.js";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { basicAuth, clients, tempDir, type Clients } from "../helpers/clients.js";

let d: Daemon;
let c: Clients;
let dir: { path: string; cleanup(): void };

before(async () => {
  d = await startDaemon();
  c = clients(d.url);
  dir = await tempDir("fs-rpc");
});

after(async () => {
  dir.cleanup();
  await d.stop();
});

async function rejectsWith(p: Promise<unknown>, code: Code, message?: RegExp): Promise<ConnectError> {
  const err = await p.then(
    () => assert.fail(`expected ${Code[code]}`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ConnectError, String(err));
  assert.equal(err.code, code, `${Code[err.code]}: ${err.rawMessage}`);
  if (message) assert.match(err.rawMessage, message);
  return err;
}

for (const kind of ["json", "binary"] as const) {
  describe(`Filesystem over Connect ${kind}`, () => {
    const fs = () => c.fs[kind];
    const base = () => join(dir.path, kind);

    before(() => mkdirSync(base()));

    test("Stat: a file, a symlink to it, a missing path, a NUL byte", async () => {
      const file = join(base(), "f.txt");
      writeFileSync(file, "12345");
      chownSync(file, 1001, 1001);
      symlinkSync(file, join(base(), "link"));
      const { entry } = await fs().stat({ path: file });
      assert.equal(entry?.name, "f.txt");
      assert.equal(entry?.type, FileType.FILE);
      assert.equal(entry?.size, 5n);
      assert.equal(entry?.mode, 0o644);
      assert.equal(entry?.permissions, "-rw-r--r--");
      assert.equal(entry?.owner, "user");
      assert.equal(entry?.group, "user");
      assert.equal(entry?.symlinkTarget, undefined);
      const mtimeMs = Number(entry!.modifiedTime!.seconds) * 1000 + entry!.modifiedTime!.nanos / 1e6;
      assert.ok(Math.abs(mtimeMs - statSync(file).mtimeMs) < 1, "mtime with sub-ms precision");

      const link = (await fs().stat({ path: join(base(), "link") })).entry!;
      assert.equal(link.type, FileType.FILE, "type of the target");
      assert.equal(link.symlinkTarget, file);
      assert.equal(link.permissions, "Lrwxrwxrwx");
      assert.equal(link.mode, 0o644, "mode of the target");
      assert.equal(link.size, BigInt(file.length), "lstat size: the link text");
      assert.equal(link.path, join(base(), "link"));

      await rejectsWith(fs().stat({ path: join(base(), "missing") }), Code.NotFound, /file not found: lstat .*missing: no such file or directory/);
      await rejectsWith(fs().stat({ path: join(base(), "bad\0name") }), Code.InvalidArgument, /NUL/);
      const long = join(base(), "n".repeat(300));
      await rejectsWith(fs().stat({ path: long }), Code.InvalidArgument, /name too long/);
      await rejectsWith(fs().listDir({ path: long }), Code.InvalidArgument, /name too long/);
      await rejectsWith(fs().makeDir({ path: long }), Code.InvalidArgument, /name too long/);
      await rejectsWith(fs().stat({ path: "/" + "d/".repeat(2100) }), Code.InvalidArgument, /longer than/);
    });

    test("Stat: broken and cyclic links describe themselves; unknown ids render as numbers", async () => {
      symlinkSync(join(base(), "nowhere"), join(base(), "broken"));
      symlinkSync(join(base(), "cyc2"), join(base(), "cyc1"));
      symlinkSync(join(base(), "cyc1"), join(base(), "cyc2"));
      const broken = (await fs().stat({ path: join(base(), "broken") })).entry!;
      assert.equal(broken.type, FileType.UNSPECIFIED);
      assert.equal(broken.mode, 0);
      assert.equal(broken.symlinkTarget, join(base(), "broken"));
      const cyc = (await fs().stat({ path: join(base(), "cyc1") })).entry!;
      assert.equal(cyc.symlinkTarget, join(base(), "cyc1"));
      const odd = join(base(), "odd");
      writeFileSync(odd, "");
      chownSync(odd, 54321, 54322);
      const e = (await fs().stat({ path: odd })).entry!;
      assert.equal(e.owner, "54321");
      assert.equal(e.group, "54322");
    });

    test("MakeDir: creates parents owned by the user, already_exists, file in the way", async () => {
      const target = join(base(), "mk/a/b");
      const { entry } = await fs().makeDir({ path: target });
      assert.equal(entry?.type, FileType.DIRECTORY);
      assert.equal(entry?.mode, 0o755);
      assert.equal(entry?.permissions, "drwxr-xr-x");
      for (const p of [join(base(), "mk"), join(base(), "mk/a"), target]) assert.equal(statSync(p).uid, 1001, p);
      await rejectsWith(fs().makeDir({ path: target }), Code.AlreadyExists, /directory already exists/);
      writeFileSync(join(base(), "plain"), "");
      await rejectsWith(fs().makeDir({ path: join(base(), "plain") }), Code.InvalidArgument, /not a directory/);
      await rejectsWith(fs().makeDir({ path: join(base(), "plain/sub") }), Code.Internal);
      const asRoot = await fs().makeDir({ path: join(base(), "byroot") }, { headers: basicAuth("root") });
      assert.equal(asRoot.entry?.owner, "root");
    });

    test("Move: renames, creates destination parents, missing source → not_found", async () => {
      const src = join(base(), "mv-src.txt");
      writeFileSync(src, "m");
      const { entry } = await fs().move({ source: src, destination: join(base(), "mv/deep/dst.txt") });
      assert.equal(entry?.path, join(base(), "mv/deep/dst.txt"));
      assert.equal(entry?.type, FileType.FILE);
      assert.ok(!existsSync(src));
      assert.equal(statSync(join(base(), "mv/deep")).uid, 1001);
      await rejectsWith(
        fs().move({ source: join(base(), "nope"), destination: join(base(), "x") }),
        Code.NotFound,
        /source file not found: rename .*nope .*x: no such file or directory/,
      );
      symlinkSync(join(base(), "mv/deep/dst.txt"), join(base(), "mvlink"));
      await fs().move({ source: join(base(), "mvlink"), destination: join(base(), "mvlink2") });
      assert.ok(lstatSync(join(base(), "mvlink2")).isSymbolicLink(), "the link itself moved");
    });

    test("Remove: files, trees and links; missing is success; empty path refused and home intact", async () => {
      mkdirSync(join(base(), "rm/a/b"), { recursive: true });
      writeFileSync(join(base(), "rm/a/b/f"), "");
      const keep = join(base(), "keep");
      writeFileSync(keep, "");
      symlinkSync(keep, join(base(), "rmlink"));
      await fs().remove({ path: join(base(), "rm") });
      assert.ok(!existsSync(join(base(), "rm")));
      await fs().remove({ path: join(base(), "rmlink") });
      assert.ok(existsSync(keep), "the link's target stays");
      await fs().remove({ path: join(base(), "never-existed") });
      await rejectsWith(fs().remove({ path: "" }), Code.InvalidArgument);
      await rejectsWith(fs().remove({ path: "" }, { headers: basicAuth("root") }), Code.InvalidArgument);
      assert.ok(statSync("/home/user").isDirectory(), "home still there");
    });

    test("ListDir: depth, lexical pre-order, root excluded, links listed but not descended", async () => {
      const root = join(base(), "tree");
      for (const p of ["b/y/deep", "a/x", "c"]) mkdirSync(join(root, p), { recursive: true });
      writeFileSync(join(root, "a/x/f.txt"), "");
      writeFileSync(join(root, "z.txt"), "");
      writeFileSync(join(root, "B.txt"), "");
      symlinkSync(join(root, "b"), join(root, "link-to-b"));
      const names = async (depth: number) => (await fs().listDir({ path: root, depth })).entries.map((e) => e.path.slice(root.length + 1));
      assert.deepEqual(await names(0), ["B.txt", "a", "b", "c", "link-to-b", "z.txt"]);
      assert.deepEqual(await names(1), ["B.txt", "a", "b", "c", "link-to-b", "z.txt"]);
      assert.deepEqual(await names(2), ["B.txt", "a", "a/x", "b", "b/y", "c", "link-to-b", "z.txt"]);
      assert.deepEqual(await names(10), ["B.txt", "a", "a/x", "a/x/f.txt", "b", "b/y", "b/y/deep", "c", "link-to-b", "z.txt"]);
      const link = (await fs().listDir({ path: root })).entries.find((e) => e.name === "link-to-b")!;
      assert.equal(link.type, FileType.DIRECTORY);
      assert.equal(link.symlinkTarget, join(root, "b"));
    });

    test("ListDir: a symlinked root is followed and paths keep the requested prefix", async () => {
      const real = join(base(), "real-root");
      mkdirSync(join(real, "sub"), { recursive: true });
      writeFileSync(join(real, "sub/f"), "");
      symlinkSync(real, join(base(), "alias"));
      const { entries } = await fs().listDir({ path: join(base(), "alias"), depth: 2 });
      assert.deepEqual(
        entries.map((e) => e.path),
        [join(base(), "alias/sub"), join(base(), "alias/sub/f")],
      );
    });

    test("ListDir: cycles → failed_precondition, a link to a file or a file → invalid_argument, missing → not_found", async () => {
      symlinkSync(join(base(), "self"), join(base(), "self"));
      await rejectsWith(fs().listDir({ path: join(base(), "self") }), Code.FailedPrecondition, /cyclic symlink or chain >255 links at/);
      symlinkSync(join(base(), "loop-b"), join(base(), "loop-a"));
      symlinkSync(join(base(), "loop-a"), join(base(), "loop-b"));
      await rejectsWith(fs().listDir({ path: join(base(), "loop-a") }), Code.FailedPrecondition, /cyclic/);
      writeFileSync(join(base(), "file-root"), "");
      symlinkSync(join(base(), "file-root"), join(base(), "link-file-root"));
      await rejectsWith(fs().listDir({ path: join(base(), "link-file-root") }), Code.InvalidArgument, /path is not a directory: .*file-root$/);
      await rejectsWith(fs().listDir({ path: join(base(), "file-root") }), Code.InvalidArgument, /not a directory/);
      await rejectsWith(fs().listDir({ path: join(base(), "missing-dir") }), Code.NotFound, /path not found/);
    });

    test("relative paths resolve under the user's home; ~ too; ~other is refused", async () => {
      const rel = `envd-fs-rpc-${kind}-${process.pid}`;
      try {
        const made = await fs().makeDir({ path: rel });
        assert.equal(made.entry?.path, `/home/user/${rel}`);
        assert.equal((await fs().stat({ path: `~/${rel}` })).entry?.path, `/home/user/${rel}`);
        await rejectsWith(fs().stat({ path: "~root/x" }), Code.InvalidArgument, /cannot expand user-specific home dir/);
      } finally {
        await fs().remove({ path: rel });
      }
      assert.ok(!existsSync(`/home/user/${rel}`));
    });
  });
}

test("ListDir: 10,000 entries are all listed, in order, quickly (JSON and binary)", async () => {
  const big = join(dir.path, "big");
  mkdirSync(big);
  const expected: string[] = [];
  for (let i = 0; i < 10_000; i++) {
    const name = `f${String(i).padStart(5, "0")}`;
    writeFileSync(join(big, name), "");
    expected.push(name);
  }
  for (const kind of ["json", "binary"] as const) {
    const t0 = performance.now();
    const { entries } = await c.fs[kind].listDir({ path: big, depth: 1 });
    const ms = performance.now() - t0;
    assert.equal(entries.length, 10_000, kind);
    assert.deepEqual(
      entries.map((e) => e.name),
      expected,
      kind,
    );
    assert.ok(entries.every((e) => e.type === FileType.FILE && e.owner === "root"));
    assert.ok(ms < 5000, `${kind}: listing took ${Math.round(ms)} ms`);
  }
});

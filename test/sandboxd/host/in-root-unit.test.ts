// Host-side access inside a root a sandbox or an image controls: links never lead out of it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { existsInRoot, lstatInRoot, mkdirInRoot, readFileInRoot, rmdirInRoot, statInRootFollowing, writeFileInRoot } from "../../../src/sandboxd/host/in-root.js";

test("writes, reads and directory changes refuse every link on the way; the following walk stays inside the root", () => {
  const root = mkdtempSync(join(tmpdir(), "in-root-"));
  const host = mkdtempSync(join(tmpdir(), "in-root-host-"));
  try {
    writeFileSync(join(host, "hosts"), "canary");
    mkdirSync(join(host, "sub"));
    mkdirSync(join(root, "usr/bin"), { recursive: true });
    writeFileSync(join(root, "usr/bin/dash"), "sh");
    symlinkSync("usr/bin", join(root, "bin"));
    symlinkSync("dash", join(root, "usr/bin/sh"));
    symlinkSync(host, join(root, "etc"));
    symlinkSync("../../../../../..", join(root, "up"));
    symlinkSync(join(host, "hosts"), join(root, "usr/hosts"));

    assert.throws(() => writeFileInRoot(root, "etc/hosts", "pwned"), /ENOTDIR|ELOOP/);
    assert.throws(() => readFileInRoot(root, "etc/hosts", 100), /ENOTDIR|ELOOP/);
    assert.throws(() => mkdirInRoot(root, "etc/sub/x"), /ENOTDIR|ELOOP/);
    assert.throws(() => rmdirInRoot(root, "etc/sub"), /ENOTDIR|ELOOP/);
    assert.throws(() => readFileInRoot(root, "usr/hosts", 100), /ELOOP/);
    assert.throws(() => writeFileInRoot(root, "../x", "x"), /climbs out/);
    assert.equal(readFileSync(join(host, "hosts"), "utf8"), "canary");
    assert.ok(existsInRoot(host, "sub", "dir"));

    // a link at the last name is replaced, not written through
    writeFileInRoot(root, "usr/hosts", "mine", { mode: 0o600 });
    assert.ok(lstatInRoot(root, "usr/hosts")!.isFile());
    assert.equal(readFileInRoot(root, "usr/hosts", 100).toString(), "mine");
    assert.equal(readFileSync(join(host, "hosts"), "utf8"), "canary");
    assert.equal(readFileInRoot(root, "usr/hosts", 2).toString(), "mi");

    // resolving as the sandbox sees it: /bin/sh through two links; absolute and ".." links stay inside
    assert.ok(statInRootFollowing(root, "bin/sh")?.isFile());
    assert.equal(statInRootFollowing(root, "etc/hosts"), undefined);
    assert.equal(statInRootFollowing(root, "up/etc/hosts"), undefined);
    assert.ok(statInRootFollowing(root, "up/usr/bin/dash")?.isFile());
    assert.ok(lstatInRoot(root, "etc")!.isSymbolicLink());

    mkdirInRoot(root, "usr/lib");
    mkdirInRoot(root, "usr/lib");
    assert.ok(existsInRoot(root, "usr/lib", "dir"));
    rmdirInRoot(root, "usr/lib");
    rmdirInRoot(root, "usr/lib");
    assert.ok(!existsInRoot(root, "usr/lib", "dir"));
  } finally {
    rmSync(root, { recursive: true, force: true });
    rmSync(host, { recursive: true, force: true });
  }
});

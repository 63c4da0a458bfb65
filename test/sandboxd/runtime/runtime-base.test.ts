// The base template's rootfs as built by debootstrap (cached per machine) and the build lock
// that keeps concurrent builders from racing.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { MAPPED_ROOT } from "../../../src/sandboxd/host/idmap.js";
import { takeLock } from "../../../src/sandboxd/images/lock.js";
import { findDebianMirror } from "../../../src/sandboxd/images/mirror.js";
import { baseRootfs, skipReason } from "../helpers/runtime.js";

describe("base rootfs", { skip: skipReason() }, () => {
  test("Debian with E2B's base tools and user `user`, owned by the mapped range with setuid bits kept", async () => {
    const [a, b] = await Promise.all([baseRootfs(), baseRootfs()]);
    assert.equal(a, b);
    assert.equal(statSync(a).uid, MAPPED_ROOT);
    for (const bin of ["python3", "python", "curl", "git", "sudo", "ps", "ip", "bash", "setpriv"]) {
      assert.ok(existsSync(join(a, "usr/bin", bin)) || existsSync(join(a, "usr/sbin", bin)) || existsSync(join(a, "bin", bin)), `${bin} missing`);
    }
    const sudo = lstatSync(join(a, "usr/bin/sudo"));
    assert.equal(sudo.uid, MAPPED_ROOT);
    assert.equal(sudo.mode & 0o4000, 0o4000, "sudo lost its setuid bit");
    assert.match(readFileSync(join(a, "etc/passwd"), "utf8"), /^user:x:1000:1000::\/home\/user:\/bin\/bash$/m);
    assert.equal(statSync(join(a, "home/user")).uid, MAPPED_ROOT + 1000);
    assert.match(readFileSync(join(a, "etc/sudoers.d/user"), "utf8"), /^user ALL=\(ALL:ALL\) NOPASSWD: ALL$/m);
    assert.ok(existsSync(join(a, "etc/ssl/certs/ca-certificates.crt")));
  });
});

describe("build lock and mirror", () => {
  test("a second taker waits for the first; a lock left by a dead process is taken over", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sandboxd-lock-"));
    try {
      const file = join(dir, "x.lock");
      const order: string[] = [];
      const release1 = await takeLock(file, { timeoutMs: 5000 });
      const second = takeLock(file, { timeoutMs: 5000 }).then((rel) => {
        order.push("second");
        return rel;
      });
      await new Promise((r) => setTimeout(r, 700));
      order.push("first releases");
      release1();
      (await second)();
      assert.deepEqual(order, ["first releases", "second"]);
      const dead = spawn("true");
      await new Promise((r) => dead.once("exit", r));
      writeFileSync(file, String(dead.pid));
      const t0 = Date.now();
      (await takeLock(file, { timeoutMs: 10_000 }))();
      assert.ok(Date.now() - t0 < 8000, "taken without waiting out the timeout");
      assert.equal(existsSync(file), false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the mirror comes from apt's deb822 or one-line sources, else deb.debian.org", () => {
    const dir = mkdtempSync(join(tmpdir(), "sandboxd-apt-"));
    try {
      assert.equal(findDebianMirror(dir), "http://deb.debian.org/debian");
      writeFileSync(join(dir, "sources.list"), "# x\ndeb [arch=amd64] http://mirror.example/debian bookworm main\n");
      assert.equal(findDebianMirror(dir), "http://mirror.example/debian");
      mkdirSync(join(dir, "sources.list.d"));
      writeFileSync(join(dir, "sources.list.d", "debian.sources"), "Types: deb\nURIs: http://other.example/debian\nSuites: bookworm\n");
      assert.equal(findDebianMirror(dir), "http://other.example/debian");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

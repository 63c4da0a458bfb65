// The storage pool on a real loop-backed XFS image: reflinked disks and snapshots share extents,
// disks made from the golden image are ext4 of their size, a snapshot under fsfreeze holds what
// was written before it and nothing after, a copy of a mounted disk is made clean by replaying its
// journal once, removes free space, and the pool survives a restart.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { StorageError } from "../../../src/sandboxd/storage/errors.js";
import { syncFs, thawFs, withFrozenFs } from "../../../src/sandboxd/storage/freeze.js";
import { replayJournal } from "../../../src/sandboxd/storage/journal.js";
import { loopsBackedBy, loopsInUse, mountAt } from "../../../src/sandboxd/storage/loops.js";
import { StoragePool } from "../../../src/sandboxd/storage/pool.js";
import { supportsReflink } from "../../../src/sandboxd/storage/reflink.js";

const MiB = 2 ** 20;
const skip = process.getuid?.() !== 0 ? "needs root (loop devices and mounts)" : spawnSync("mkfs.xfs", ["-V"]).error ? "mkfs.xfs is not installed (xfsprogs)" : false;

const sh = (cmd: string) => spawnSync("bash", ["-c", cmd], { encoding: "utf8" });
const code = (c: string) => (err: unknown) => err instanceof StorageError && err.code === c;

describe("storage pool: loop-backed XFS with reflinks", { skip }, () => {
  let dataDir: string;
  let mnt: string;
  let pool: StoragePool;
  const mounted: string[] = [];

  /** Loop-mounts a disk image of the pool at a fresh directory, as the runtime does. */
  const mountDisk = (image: string, name: string): string => {
    const mp = join(mnt, name);
    mkdirSync(mp, { recursive: true });
    execFileSync("mount", ["-o", "loop,nosuid,nodev,noatime", image, mp]);
    mounted.push(mp);
    return mp;
  };
  const umountDisk = (mp: string) => {
    execFileSync("umount", [mp]);
    mounted.splice(mounted.indexOf(mp), 1);
  };

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "sandboxd-storage-"));
    mnt = mkdtempSync(join(tmpdir(), "sandboxd-storage-mnt-"));
    pool = await StoragePool.open({ dataDir, backing: "loop", sizeMB: 1024 });
  });

  after(async () => {
    const image = join(dataDir, "storage.img");
    try {
      for (const mp of mounted.reverse()) spawnSync("umount", [mp]);
      await pool?.close();
      if (mountAt(join(dataDir, "storage"))) spawnSync("umount", [join(dataDir, "storage")]);
      for (const dev of loopsBackedBy(image)) spawnSync("losetup", ["-d", dev]);
      assert.deepEqual(await loopsInUse(image), []);
    } finally {
      // never delete through a mount that is still there
      if (!mountAt(join(dataDir, "storage"))) rmSync(dataDir, { recursive: true, force: true });
      if (mounted.every((mp) => !mountAt(mp))) rmSync(mnt, { recursive: true, force: true });
    }
  });

  test("the pool is an XFS image mounted nosuid,nodev under the data dir, its size and free space reported", () => {
    assert.equal(pool.backing, "loop");
    const m = mountAt(join(dataDir, "storage"));
    assert.equal(m?.fstype, "xfs");
    const line = readFileSync("/proc/self/mountinfo", "utf8").split("\n").find((l) => l.split(" ")[4] === join(dataDir, "storage"));
    for (const flag of ["nosuid", "nodev", "noexec"]) assert.ok(line?.split(" ")[5].split(",").includes(flag), `${flag} in ${line}`);
    const u = pool.usage();
    assert.ok(u.sizeBytes > 900 * MiB && u.sizeBytes <= 1024 * MiB, `size ${u.sizeBytes}`);
    assert.ok(u.freeBytes > 800 * MiB && u.freeBytes < u.sizeBytes);
    assert.ok(u.imageBytes > 0 && u.hostFreeBytes > 0);
  });

  test("auto picks the host's file system only where it reflinks", async () => {
    const other = mkdtempSync(join(tmpdir(), "sandboxd-storage-auto-"));
    try {
      const p = await StoragePool.open({ dataDir: other, sizeMB: 1024 });
      assert.equal(p.backing, supportsReflink(other) ? "host" : "loop");
      assert.equal(await p.close(), true);
      assert.equal(mountAt(join(other, "storage")), undefined);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  test("a disk from the golden image mounts as ext4 and stops writes at its size", async () => {
    const images = await Promise.all(["g1", "g2", "g3"].map((id) => pool.createDisk(id, 64)));
    assert.deepEqual(readdirSync(join(dataDir, "storage", "golden")), ["ext4-v1-64.img"]);
    const mp = mountDisk(images[0], "g1");
    assert.equal(mountAt(mp)?.fstype, "ext4");
    const dd = sh(`dd if=/dev/zero of=${mp}/fill bs=1M count=100 conv=fsync 2>&1`);
    assert.notEqual(dd.status, 0);
    assert.match(dd.stdout, /No space left on device/);
    umountDisk(mp);
    await assert.rejects(pool.createDisk("g1", 64), code("exists"));
    await assert.rejects(pool.createDisk("g4", 8), code("invalid_size"));
    for (const id of ["g1", "g2", "g3"]) await pool.removeDisk(id);
  });

  test("a snapshot shares the disk's extents, and removing both gives the space back", async () => {
    const image = await pool.createDisk("big", 256);
    const mp = mountDisk(image, "big");
    execFileSync("dd", ["if=/dev/urandom", `of=${mp}/data`, "bs=1M", "count=96", "conv=fsync"], { stdio: "ignore" });
    umountDisk(mp);
    const before = pool.usage().freeBytes;
    const snap = await pool.snapshotDisk("big", "big-snap");
    const afterClone = pool.usage().freeBytes;
    assert.ok(before - afterClone < 8 * MiB, `a clone took ${(before - afterClone) / MiB} MiB`);
    assert.match(execFileSync("filefrag", ["-v", snap], { encoding: "utf8" }), /shared/);
    assert.deepEqual(pool.listSnapshots(), ["big-snap"]);
    await pool.removeDisk("big");
    await pool.removeSnapshot("big-snap");
    await pool.removeSnapshot("big-snap"); // idempotent
    execFileSync("sync");
    assert.ok(pool.usage().freeBytes - afterClone > 90 * MiB, "the data's blocks are free again");
  });

  test("a snapshot under fsfreeze holds what was written before it and not after; a disk from it is independent", async () => {
    const mp = mountDisk(await pool.createDisk("live", 128), "live");
    writeFileSync(join(mp, "before"), "kept");
    await withFrozenFs(mp, () => pool.snapshotDisk("live", "live-snap"));
    writeFileSync(join(mp, "after"), "not in the snapshot");
    const fork = mountDisk(await pool.diskFromSnapshot("live-snap", "fork"), "fork");
    assert.equal(readFileSync(join(fork, "before"), "utf8"), "kept");
    assert.equal(existsSync(join(fork, "after")), false);
    writeFileSync(join(fork, "forked"), "only here");
    assert.equal(existsSync(join(mp, "forked")), false);
    // withFrozenFs thaws when the copy fails, and thawing a thawed file system is a no-op
    await assert.rejects(withFrozenFs(mp, () => pool.snapshotDisk("nope", "x")), code("not_found"));
    writeFileSync(join(mp, "writable"), "yes");
    await thawFs(mp);
    // syncfs alone also makes the image hold what was written (the sandbox frozen by its cgroup)
    await syncFs(mp);
    await pool.snapshotDisk("live", "synced");
    const synced = mountDisk(await pool.diskFromSnapshot("synced", "synced-disk"), "synced");
    assert.equal(readFileSync(join(synced, "writable"), "utf8"), "yes");
    umountDisk(synced);
    await pool.removeDisk("synced-disk");
    await pool.removeSnapshot("synced");
    await assert.rejects(pool.removeDisk("fork"), code("busy"));
    await assert.rejects(pool.diskFromSnapshot("missing", "x"), code("not_found"));
    await assert.rejects(pool.snapshotDisk("live", "live-snap"), code("exists"));
    umountDisk(fork);
    umountDisk(mp);
    await pool.removeDisk("fork");
    await pool.removeDisk("live");
    await pool.removeSnapshot("live-snap");
    assert.deepEqual([pool.listDisks(), pool.listSnapshots()], [[], []]);
  });

  test("a copy of a mounted disk has its journal replayed once, so disks made from it mount clean; images get a one-block CoW hint", async () => {
    const mp = mountDisk(await pool.createDisk("journaled", 128), "journaled");
    for (let i = 0; i < 20; i++) mkdirSync(join(mp, `d${i}`));
    writeFileSync(join(mp, "d0", "file"), "in the copy");
    await syncFs(mp);
    const snap = await pool.snapshotDisk("journaled", "journaled-snap");
    const needsRecovery = (img: string) => /needs_recovery/.test(execFileSync("dumpe2fs", ["-h", img], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }));
    assert.ok(needsRecovery(snap), "the copy of a mounted ext4 holds committed transactions to replay");
    await replayJournal(snap);
    assert.ok(!needsRecovery(snap), "replayed once in the copy");
    const copy = await pool.diskFromSnapshot("journaled-snap", "journaled-copy");
    assert.ok(!needsRecovery(copy), "a disk made from it has nothing to replay at its mount");
    assert.match(execFileSync("xfs_io", ["-c", "cowextsize", copy], { encoding: "utf8" }), /^\[4096\] /, "one-block CoW extent size hint");
    const fork = mountDisk(copy, "journaled-copy");
    assert.equal(readFileSync(join(fork, "d0", "file"), "utf8"), "in the copy");
    assert.equal(readdirSync(fork).filter((n) => n.startsWith("d")).length, 20);
    umountDisk(fork);
    umountDisk(mp);
    await pool.removeDisk("journaled-copy");
    await pool.removeDisk("journaled");
    await pool.removeSnapshot("journaled-snap");
  });

  test("names with a slash, dots or odd characters are refused and nothing is made", async () => {
    for (const bad of ["../x", "a/b", ".", "..", "", "x".repeat(129), "a b", "a.img", "-x"]) {
      await assert.rejects(pool.createDisk(bad, 64), code("invalid_name"), bad);
      await assert.rejects(pool.removeDisk(bad), code("invalid_name"), bad);
      await assert.rejects(pool.removeSnapshot(bad), code("invalid_name"), bad);
    }
    await pool.createDisk("ok", 64);
    await assert.rejects(pool.snapshotDisk("ok", "../../etc/passwd"), code("invalid_name"));
    await assert.rejects(pool.diskFromSnapshot("../disks/ok", "y"), code("invalid_name"));
    assert.deepEqual(pool.listDisks(), ["ok"]);
    assert.deepEqual(pool.listSnapshots(), []);
    await pool.removeDisk("ok");
  });

  test("the pool survives a stop with a disk in use, a crash's half-made files, and a restart", async () => {
    const image = await pool.createDisk("kept", 64);
    await pool.snapshotDisk("kept", "kept-snap");
    const mp = mountDisk(image, "kept");
    writeFileSync(join(mp, "f"), "still here");
    writeFileSync(join(dataDir, "storage", "tmp", "clone-999-1"), "half-made");
    // a stop while the disk is mounted leaves the pool mounted; the next open finds it
    assert.equal(await pool.close(), false);
    await assert.rejects(pool.createDisk("late", 64), /closed/);
    pool = await StoragePool.open({ dataDir, backing: "loop" });
    assert.equal(pool.recovery.remounted, true);
    assert.deepEqual(pool.recovery.swept, [join(dataDir, "storage", "tmp", "clone-999-1")]);
    assert.deepEqual([pool.recovery.disks, pool.recovery.snapshots], [["kept"], ["kept-snap"]]);
    umountDisk(mp);
    // a clean stop unmounts it and frees its loop device; a crash mid-make of the image is swept
    assert.equal(await pool.close(), true);
    assert.equal(mountAt(join(dataDir, "storage")), undefined);
    assert.deepEqual(loopsBackedBy(join(dataDir, "storage.img")), []);
    writeFileSync(join(dataDir, "storage.img.tmp-999"), "");
    writeFileSync(join(dataDir, ".reflink-probe-999"), "");
    pool = await StoragePool.open({ dataDir });
    assert.equal(pool.backing, "loop");
    assert.equal(pool.recovery.remounted, false);
    assert.deepEqual(pool.recovery.swept, [join(dataDir, "storage.img.tmp-999"), join(dataDir, ".reflink-probe-999")]);
    assert.deepEqual([pool.listDisks(), pool.listSnapshots()], [["kept"], ["kept-snap"]]);
    const again = mountDisk(pool.diskPath("kept"), "again");
    assert.equal(readFileSync(join(again, "f"), "utf8"), "still here");
    umountDisk(again);
    await pool.removeDisk("kept");
    await pool.removeSnapshot("kept-snap");
  });

  test("a loop-backed pool grows online", async () => {
    const before = pool.usage().sizeBytes;
    assert.equal(await pool.grow(1536), true);
    assert.ok(pool.usage().sizeBytes - before > 400 * MiB);
    assert.equal(await pool.grow(1024), false);
  });
});

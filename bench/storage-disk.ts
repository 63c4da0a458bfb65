// Sandbox disks on the storage pool against today's mkfs per sandbox, in one run: making a
// disk (alone and with its mount), a snapshot of a 1 GiB disk holding 200 MiB (the freeze
// window with fsfreeze or syncfs, against a plain copy of the image), a disk from it, and the pool space 100 forks take.
// A scenario for bench/run.ts (`storageDisk`), and runnable alone: node build/bench/storage-disk.js [--quick]
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mountDisk, unmountDisk } from "../src/sandboxd/host/disk.js";
import { execTool, mustExec } from "../src/sandboxd/host/exec.js";
import { syncFs, withFrozenFs } from "../src/sandboxd/storage/freeze.js";
import { StoragePool } from "../src/sandboxd/storage/pool.js";
import { NotAvailable } from "./lib/available.js";
import { compared, single } from "./lib/rows.js";
import { median, now, percentile } from "./lib/stats.js";
import { renderText } from "./lib/table.js";
import type { BenchContext, Row, Scenario } from "./lib/types.js";

const ID = "13-storage-disk";
const MiB = 2 ** 20;
const MKFS = ["-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard"];
const MOUNT = "loop,nosuid,nodev,noatime";

/** Milliseconds `fn` takes. */
async function ms(fn: () => Promise<unknown>): Promise<number> {
  const t0 = now();
  await fn();
  return now() - t0;
}

/** p50 / p95 of `xs` as a note. */
const spread = (xs: number[]) => `p50 ${median(xs).toFixed(1)} ms, p95 ${percentile(xs, 95).toFixed(1)} ms, n=${xs.length}`;

/** Today's disk (sparse file + mkfs.ext4 on the host's file system, as host/disk.ts does) against a reflink of the pool's golden image, interleaved. */
async function diskRows(pool: StoragePool, work: string, n: number, sizeMB: number): Promise<Row[]> {
  const t = { mkfs: [] as number[], clone: [] as number[], mkfsMount: [] as number[], cloneMount: [] as number[] };
  await pool.createDisk("warm", sizeMB); // the golden image is made once, outside the timing
  await pool.removeDisk("warm");
  for (let i = 0; i < n; i++) {
    const order = i % 2 === 0 ? ["mkfs", "clone"] : ["clone", "mkfs"];
    for (const side of order) {
      const image = join(work, `today-${i}.img`);
      const mp = join(work, `mnt-${side}-${i}`);
      if (side === "mkfs") {
        t.mkfs.push(await ms(async () => {
          execFileSync("truncate", ["-s", `${sizeMB}M`, image]);
          await mustExec("mkfs.ext4", [...MKFS, image]);
        }));
        rmSync(image);
        t.mkfsMount.push(await ms(() => mountDisk({ image, target: mp, sizeMB })));
        await unmountDisk(mp);
        rmSync(image);
      } else {
        t.clone.push(await ms(() => pool.createDisk(`c${i}`, sizeMB)));
        await pool.removeDisk(`c${i}`);
        mkdirSync(mp);
        t.cloneMount.push(await ms(async () => {
          await pool.createDisk(`c${i}`, sizeMB);
          await mustExec("mount", ["-o", MOUNT, pool.diskPath(`c${i}`), mp]);
        }));
        await unmountDisk(mp);
        await pool.removeDisk(`c${i}`);
      }
      rmSync(mp, { recursive: true, force: true });
    }
  }
  const base = `mkfs.ext4 per sandbox (today, ${sizeMB} MiB)`;
  return [
    compared({ scenario: ID, metric: `new ${sizeMB} MiB disk: reflink of golden image, p50`, value: median(t.clone), unit: "ms", baseline: median(t.mkfs), baselineLabel: base, note: `reflink ${spread(t.clone)}; mkfs ${spread(t.mkfs)}` }),
    compared({ scenario: ID, metric: `new ${sizeMB} MiB disk + loop mount: reflink, p50`, value: median(t.cloneMount), unit: "ms", baseline: median(t.mkfsMount), baselineLabel: `${base} + mount`, note: `reflink ${spread(t.cloneMount)}; mkfs ${spread(t.mkfsMount)}` }),
  ];
}

/** A 1 GiB disk holding 200 MiB: freeze + reflink + thaw, against a full copy of the image; then disks from the snapshot and 100 forks' space. */
async function snapshotRows(pool: StoragePool, work: string, n: number, forks: number): Promise<Row[]> {
  const mp = join(work, "live");
  mkdirSync(mp);
  await pool.createDisk("live", 1024);
  await mustExec("mount", ["-o", MOUNT, pool.diskPath("live"), mp]);
  const rows: Row[] = [];
  try {
    await mustExec("dd", ["if=/dev/urandom", `of=${mp}/data`, "bs=1M", "count=200", "conv=fsync"]);
    // 8 MiB written just before, not yet on disk: the freeze flushes it, as a busy sandbox's would be
    const dirty = async () => mustExec("dd", ["if=/dev/urandom", `of=${mp}/dirty`, "bs=1M", "count=8", "conv=notrunc"]);
    // three ways to quiesce the disk for the copy, interleaved; each timed as the sandbox's freeze window
    const t = { freeze: [] as number[], presync: [] as number[], sync: [] as number[], clone: [] as number[] };
    let k = 0;
    const copyOne = async () => t.clone.push(await ms(() => pool.snapshotDisk("live", `s${k++}`)));
    for (let i = 0; i < n; i++) {
      await dirty();
      t.freeze.push(await ms(() => withFrozenFs(mp, copyOne)));
      await dirty();
      await syncFs(mp); // while the sandbox runs: not in the window
      t.presync.push(await ms(() => withFrozenFs(mp, copyOne)));
      await dirty();
      t.sync.push(await ms(async () => {
        await syncFs(mp);
        await copyOne();
      }));
    }
    const copy: number[] = [];
    for (let i = 0; i < Math.min(n, 5); i++) {
      await dirty();
      const dst = join(work, `copy-${i}.img`);
      copy.push(await ms(() => withFrozenFs(mp, () => mustExec("cp", ["--sparse=always", "--reflink=never", pool.diskPath("live"), dst]))));
      rmSync(dst);
    }
    const base = { baseline: median(copy), baselineLabel: "fsfreeze + full copy of the image (cp --reflink=never)", unit: "ms", scenario: ID };
    const target = { text: "≤ 100 ms of freeze", met: (r: { value: number }) => r.value <= 100 };
    rows.push(compared({ ...base, metric: "snapshot of 1 GiB disk with 200 MiB (8 MiB dirty): fsfreeze + reflink + thaw, p50", value: median(t.freeze), target, note: spread(t.freeze) }));
    rows.push(compared({ ...base, metric: "same, syncfs first while running: fsfreeze + reflink + thaw, p50", value: median(t.presync), target, note: spread(t.presync) }));
    rows.push(compared({ ...base, metric: "same, syncfs + reflink (no fsfreeze), p50", value: median(t.sync), target, note: spread(t.sync) }));
    rows.push(single(ID, "the reflink of the 1 GiB image alone, p50", median(t.clone), "ms", undefined, spread(t.clone)));
    const fromSnap: number[] = [];
    for (let i = 0; i < n; i++) {
      const fmp = join(work, `from-${i}`);
      mkdirSync(fmp);
      fromSnap.push(await ms(async () => {
        await pool.diskFromSnapshot(`s${i}`, `f${i}`);
        await mustExec("mount", ["-o", MOUNT, pool.diskPath(`f${i}`), fmp]);
      }));
      await unmountDisk(fmp);
      await pool.removeDisk(`f${i}`);
      rmSync(fmp, { recursive: true });
    }
    rows.push(single(ID, "disk from that snapshot + loop mount, p50", median(fromSnap), "ms", undefined, spread(fromSnap)));
    for (let i = 0; i < k; i++) await pool.removeSnapshot(`s${i}`);
    execFileSync("sync");
    const before = pool.usage().usedBytes;
    await pool.snapshotDisk("live", "base");
    for (let i = 0; i < forks; i++) await pool.diskFromSnapshot("base", `fork${i}`);
    execFileSync("sync");
    const grew = pool.usage().usedBytes - before;
    rows.push(single(ID, `pool space taken by ${forks} forks of the 200 MiB disk`, grew / MiB, "MiB", { text: "≤ 1.2× one disk's 208 MiB", met: grew <= 1.2 * 208 * MiB }, "shared extents: statfs of the pool before and after"));
    for (let i = 0; i < forks; i++) await pool.removeDisk(`fork${i}`);
    await pool.removeSnapshot("base");
  } finally {
    await unmountDisk(mp);
    await pool.removeDisk("live");
  }
  return rows;
}

async function run(ctx: BenchContext): Promise<Row[]> {
  if (process.getuid?.() !== 0) throw new NotAvailable("needs root (loop devices and mounts)");
  if ((await execTool("mkfs.xfs", ["-V"]).catch(() => ({ code: 1 }))).code !== 0) throw new NotAvailable("mkfs.xfs is not installed (xfsprogs)");
  const dataDir = join(ctx.tmp, "data");
  const work = join(ctx.tmp, "work");
  mkdirSync(work, { recursive: true });
  const pool = await StoragePool.open({ dataDir, backing: "loop", sizeMB: 8192 });
  try {
    const n = ctx.quick ? 3 : 30;
    const rows = await diskRows(pool, work, n, 1024);
    if (!ctx.quick) rows.push(...(await diskRows(pool, work, 10, 10240)));
    rows.push(...(await snapshotRows(pool, work, ctx.quick ? 2 : 20, ctx.quick ? 10 : 100)));
    return rows;
  } finally {
    if (!(await pool.close())) spawnSync("umount", ["-l", join(dataDir, "storage")]);
  }
}

/** The storage scenario: see the module comment. */
export const storageDisk: Scenario = { id: ID, title: "Sandbox disks: mkfs per sandbox vs reflink from a golden image; snapshot and forks of a 1 GiB disk", run };

if (process.argv[1]?.endsWith("storage-disk.js")) {
  const tmp = mkdtempSync(join(tmpdir(), "sandboxd-bench-storage-"));
  const quick = process.argv.includes("--quick");
  run({ quick, tmp, log: (m) => process.stderr.write(`${m}\n`) })
    .then((rows) => process.stdout.write(renderText([{ id: ID, title: storageDisk.title, status: "ok", seconds: 0, rows }])))
    .finally(() => rmSync(tmp, { recursive: true, force: true }));
}

// The storage pool: the one directory where sandbox disk images and their snapshots live, on a
// file system that reflinks, so making a disk, snapshotting it or forking it costs metadata
// only. Either the data dir's own file system (when it reflinks: XFS with reflink, btrfs) or a
// loop-backed XFS image under the data dir. Owns `<dataDir>/storage` (and `storage.img`).
import { linkSync, mkdirSync, readdirSync, rmSync, statfsSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Logger } from "../log.js";
import { StorageError } from "./errors.js";
import { GoldenImages, isGoldenName, MAX_DISK_MB, MIN_DISK_MB } from "./golden.js";
import { holdsImages, prepareLayout, type PoolDirs } from "./layout.js";
import { loopsInUse } from "./loops.js";
import { createPoolImage, defaultPoolSizeMB, growPoolImage, hasPoolImage, mountPoolImage, sweepImageTemporaries, unmountPoolImage } from "./loop-image.js";
import { setCowExtentHint } from "./cow-hint.js";
import { checkID, idOfImage, imageName } from "./names.js";
import { cloneFile, supportsReflink, sweepProbes } from "./reflink.js";

/** Where the pool lives: on the data dir's own file system, or in a loop-mounted XFS image. */
export type PoolBacking = "host" | "loop";

/** How to open the pool. */
export interface PoolOptions {
  dataDir: string;
  /** "auto" (default): the host's file system when it reflinks, else a loop image; a pool already made keeps its kind. */
  backing?: "auto" | PoolBacking;
  /** Size of a loop image: made this large, grown to it when larger than the image (default: half the host's free space at first start). */
  sizeMB?: number;
  log?: Logger;
}

/** The pool's size and use, as the budget and /metrics read them. */
export interface PoolUsage {
  backing: PoolBacking;
  /** The pool's file system: its size, free space (for sandboxd) and space used; shared extents count once. */
  sizeBytes: number;
  freeBytes: number;
  usedBytes: number;
  disks: number;
  snapshots: number;
  /** Free space of the host file system under the data dir (a loop image takes from it as the pool fills). */
  hostFreeBytes: number;
  /** Host disk the loop image takes now (0 on a host-backed pool). */
  imageBytes: number;
}

/** What `open` found: disks and snapshots kept from before, and half-made files it removed. */
export interface PoolRecovery {
  disks: string[];
  snapshots: string[];
  swept: string[];
  /** Whether the loop image was already mounted (sandboxd stopped while disks were in use, or crashed). */
  remounted: boolean;
}

/** The storage pool of one data dir; see the module comment. Operations take IDs, never paths. */
export class StoragePool {
  private readonly goldens: GoldenImages;
  private seq = 0;
  private closed = false;

  private constructor(
    /** The pool's directory (`<dataDir>/storage`). */
    readonly root: string,
    readonly backing: PoolBacking,
    private readonly dirs: PoolDirs,
    private readonly dataDir: string,
    private readonly loop: { image: string; device: string } | undefined,
    /** What open found and swept. */
    readonly recovery: PoolRecovery,
  ) {
    this.goldens = new GoldenImages(dirs.golden, (kind) => this.tmpName(kind));
  }

  /** Opens the pool of `opts.dataDir`: makes it on first start, mounts it again after a stop or crash, sweeps half-made files, lists what it holds. */
  static async open(opts: PoolOptions): Promise<StoragePool> {
    const dataDir = resolve(opts.dataDir);
    const root = join(dataDir, "storage");
    const image = join(dataDir, "storage.img");
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const swept = [...sweepImageTemporaries(image), ...sweepProbes(dataDir)];
    const backing = chooseBacking(dataDir, root, image, opts.backing ?? "auto");
    let loop: { image: string; device: string } | undefined;
    let remounted = false;
    if (backing === "loop") {
      if (!hasPoolImage(image)) await createPoolImage(image, opts.sizeMB ?? defaultPoolSizeMB(dataDir));
      const m = await mountPoolImage(image, root);
      loop = { image, device: m.device };
      remounted = m.reused;
      if (opts.sizeMB && (await growPoolImage(image, m.device, root, opts.sizeMB))) opts.log?.info({ sizeMB: opts.sizeMB }, "grew the storage pool");
    }
    const layout = prepareLayout(root);
    swept.push(...layout.swept);
    // every image is made in tmp/ (golden images by mkfs, the others as clones) and inherits the hint
    await setCowExtentHint(layout.dirs.tmp);
    for (const name of readdirSync(layout.dirs.golden)) {
      if (!isGoldenName(name)) swept.push(rmFile(join(layout.dirs.golden, name)));
    }
    const pool = new StoragePool(root, backing, layout.dirs, dataDir, loop, { disks: [], snapshots: [], swept, remounted });
    pool.recovery.disks.push(...pool.listDisks());
    pool.recovery.snapshots.push(...pool.listSnapshots());
    if (swept.length > 0) opts.log?.info({ paths: swept }, "removed storage files a crash left half-made");
    opts.log?.info({ backing, root, disks: pool.recovery.disks.length, snapshots: pool.recovery.snapshots.length, remounted }, "storage pool open");
    return pool;
  }

  /** The image file of disk `id` (which may not exist yet). */
  diskPath(id: string): string {
    return join(this.dirs.disks, imageName(checkID(id, "disk")));
  }

  /** The image file of snapshot `snapID` (which may not exist yet). */
  snapshotPath(snapID: string): string {
    return join(this.dirs.snapshots, imageName(checkID(snapID, "snapshot")));
  }

  /** Makes disk `id`: an empty ext4 of `sizeMB`, a reflink of the size's golden image (made by mkfs on first use). Returns its image file. */
  async createDisk(id: string, sizeMB: number): Promise<string> {
    const dst = this.diskPath(id);
    if (!Number.isInteger(sizeMB) || sizeMB < MIN_DISK_MB || sizeMB > MAX_DISK_MB) {
      throw new StorageError("invalid_size", `disk size ${sizeMB} MiB: give a whole number from ${MIN_DISK_MB} to ${MAX_DISK_MB}`);
    }
    this.open_();
    return this.publish(await this.goldens.get(sizeMB), dst, `disk ${id}`);
  }

  /**
   * Records snapshot `snapID` of disk `id`: a reflink copy of its image. A disk that is mounted
   * must be quiet: the caller freezes the sandbox's tasks and syncs its file system around it.
   */
  async snapshotDisk(id: string, snapID: string): Promise<string> {
    const src = this.existing(this.diskPath(id), `disk ${id}`);
    return this.publish(src, this.snapshotPath(snapID), `snapshot ${snapID}`);
  }

  /** Makes disk `id` from snapshot `snapID`: a reflink copy with the snapshot's files and size. */
  async diskFromSnapshot(snapID: string, id: string): Promise<string> {
    const src = this.existing(this.snapshotPath(snapID), `snapshot ${snapID}`);
    return this.publish(src, this.diskPath(id), `disk ${id}`);
  }

  /** Removes disk `id`; one already gone is fine, one still attached to a loop device (mounted) is refused with "busy". */
  async removeDisk(id: string): Promise<void> {
    await this.removeImage(this.diskPath(id), `disk ${id}`);
  }

  /** Removes snapshot `snapID`; one already gone is fine. Whether a sandbox still needs it is the caller's to know. */
  async removeSnapshot(snapID: string): Promise<void> {
    await this.removeImage(this.snapshotPath(snapID), `snapshot ${snapID}`);
  }

  /** The IDs of the disks in the pool, sorted. */
  listDisks(): string[] {
    return listImages(this.dirs.disks);
  }

  /** The IDs of the snapshots in the pool, sorted. */
  listSnapshots(): string[] {
    return listImages(this.dirs.snapshots);
  }

  /** The pool's size, free space and contents (statfs: cheap enough for every /metrics scrape). */
  usage(): PoolUsage {
    const s = statfsSync(this.root);
    const h = statfsSync(this.dataDir);
    return {
      backing: this.backing,
      sizeBytes: s.blocks * s.bsize,
      freeBytes: s.bavail * s.bsize,
      usedBytes: (s.blocks - s.bfree) * s.bsize,
      disks: this.listDisks().length,
      snapshots: this.listSnapshots().length,
      hostFreeBytes: h.bavail * h.bsize,
      imageBytes: this.loop ? statSync(this.loop.image).blocks * 512 : 0,
    };
  }

  /** Grows a loop-backed pool to `sizeMB`, online; false when it is that large already or the pool is the host's file system. */
  async grow(sizeMB: number): Promise<boolean> {
    this.open_();
    if (!this.loop) return false;
    return growPoolImage(this.loop.image, this.loop.device, this.root, sizeMB);
  }

  /** Closes the pool: unmounts a loop-backed one. False when it stays mounted because disks of it are still in use (open finds it again). */
  async close(): Promise<boolean> {
    this.closed = true;
    return this.loop ? unmountPoolImage(this.loop.image, this.root) : true;
  }

  private open_(): void {
    if (this.closed) throw new Error("the storage pool is closed");
  }

  /** Reflinks `src` to a temporary name, then links it to `dst` (never replacing one), so a crash leaves only a temporary to sweep. */
  private async publish(src: string, dst: string, what: string): Promise<string> {
    this.open_();
    const tmp = this.tmpName("clone");
    try {
      await cloneFile(src, tmp);
      linkSync(tmp, dst);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST") throw new StorageError("exists", `${what} already exists`);
      throw err;
    } finally {
      rmSync(tmp, { force: true });
    }
    return dst;
  }

  private existing(path: string, what: string): string {
    this.open_();
    try {
      if (statSync(path).isFile()) return path;
    } catch {
      // reported below
    }
    throw new StorageError("not_found", `${what} does not exist`);
  }

  private async removeImage(path: string, what: string): Promise<void> {
    this.open_();
    if ((await loopsInUse(path)).length > 0) throw new StorageError("busy", `${what} is still attached to a loop device (mounted); unmount it first`);
    rmSync(path, { force: true });
  }

  private tmpName(kind: string): string {
    return join(this.dirs.tmp, `${kind}-${process.pid}-${++this.seq}`);
  }
}

/** Which backing the pool of `dataDir` has or gets: a pool already made keeps its kind; a new one follows `wanted` (auto: host when it reflinks). */
function chooseBacking(dataDir: string, root: string, image: string, wanted: "auto" | PoolBacking): PoolBacking {
  const hasImage = hasPoolImage(image);
  if (wanted === "host" && hasImage) throw new Error(`the storage pool of ${dataDir} is a loop image (${image}); it cannot become host-backed`);
  if (hasImage) return "loop";
  // a host-backed pool that holds images keeps its kind: a loop image mounted over it would hide them
  if (wanted === "loop" && holdsImages(root)) throw new Error(`the storage pool of ${dataDir} is on the host's file system and holds disks; it cannot become a loop image`);
  if (wanted === "loop") return "loop";
  if (supportsReflink(dataDir)) return "host";
  if (wanted === "host") throw new Error(`the file system of ${dataDir} cannot reflink files; use a loop-backed storage pool`);
  return "loop";
}

function listImages(dir: string): string[] {
  return readdirSync(dir)
    .map(idOfImage)
    .filter((id): id is string => id !== undefined)
    .sort();
}

function rmFile(path: string): string {
  rmSync(path, { force: true });
  return path;
}

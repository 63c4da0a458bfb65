// The runc backend's sandbox disks on the storage pool: each sandbox's disk is an image in the
// pool (a reflink of the golden image, of a snapshot, or the sandbox's own disk kept by a stop),
// loop-mounted at `<sandbox dir>/disk` on the host; snapshots are reflinks of it taken while the
// container's tasks are frozen and its file system synced.
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../log.js";
import { mountDiskImage, unmountDisk } from "../host/disk.js";
import { isMounted } from "../host/mounts.js";
import { cgroupFrozen, freezeCgroup, thawCgroup } from "../host/cgroups.js";
import { syncFs, thawFs } from "../storage/freeze.js";
import { replayJournal } from "../storage/journal.js";
import type { StoragePool } from "../storage/pool.js";
import type { SandboxSpec } from "./runtime.js";

/** Where a sandbox's disk image comes from. */
export type DiskSource = { kind: "new"; sizeMB: number } | { kind: "snapshot"; snapshotID: string } | { kind: "kept" };

/** The disk source a spec asks for: a snapshot's copy, the sandbox's own kept disk, or a new empty one. */
export function diskSource(spec: SandboxSpec): DiskSource {
  if (spec.fromSnapshot) return { kind: "snapshot", snapshotID: spec.fromSnapshot };
  if (spec.keptDisk) return { kind: "kept" };
  return { kind: "new", sizeMB: spec.diskSizeMB };
}

/** The sandboxes' disks of one runtime, over its storage pool. */
export class SandboxDisks {
  constructor(
    readonly pool: StoragePool,
    private readonly log: Logger,
  ) {}

  /** Makes (or, for a kept disk, finds) sandbox `id`'s disk image in the pool and mounts it at `target`. */
  async attach(id: string, source: DiskSource, target: string, nice?: number): Promise<void> {
    let image: string;
    if (source.kind === "snapshot") image = await this.pool.diskFromSnapshot(source.snapshotID, id);
    else if (source.kind === "kept") {
      image = this.pool.diskPath(id);
      if (!this.pool.listDisks().includes(id)) throw new Error(`sandbox ${id} has no kept disk in the storage pool`);
    } else image = await this.pool.createDisk(id, source.sizeMB);
    await mountDiskImage({ image, target, nice });
  }

  /** Unmounts the disk at `target` (when mounted); the image stays in the pool. */
  detach(target: string): Promise<void> {
    return unmountDisk(target);
  }

  /**
   * Removes sandbox `id`'s disk image from the pool once it is unmounted here. The file is unlinked
   * at once: the loop device the unmount releases (asynchronously), or one a mount namespace
   * elsewhere on the host still holds, keeps its blocks until it goes, then they return to the pool.
   */
  async remove(id: string, target: string): Promise<void> {
    if (isMounted(target)) throw new Error(`the disk of sandbox ${id} is still mounted at ${target}; its image is kept`);
    rmSync(this.pool.diskPath(id), { force: true });
  }


  /**
   * Records snapshot `snapID` of sandbox `id`'s disk (its cgroup `cgroup`). A mounted disk is
   * synced while the sandbox runs; then its tasks are frozen through the cgroup's freezer file (a
   * running sandbox only for the copy; a frozen one stays frozen), what they wrote since is synced,
   * and the image is reflinked: nothing in the sandbox writes, so the copy holds every write made
   * before the freeze, and the clone itself is atomic against the loop device's writes. Thawed
   * whatever happens. Then, with the sandbox running again and `replay` asked (more than one disk
   * will be made from the copy), the copy's journal is replayed into it once, so those disks do
   * not each replay (and own) the same metadata blocks; a failed replay is logged and leaves a
   * copy their mounts replay. A disk not mounted (a sandbox stopped with its disk kept) is clean.
   */
  async snapshot(id: string, target: string, snapID: string, cgroup: string, opts: { replay: boolean }): Promise<void> {
    if (!isMounted(target)) {
      await this.pool.snapshotDisk(id, snapID);
      return;
    }
    await syncFs(target);
    const running = !cgroupFrozen(cgroup);
    if (running) await freezeCgroup(cgroup);
    try {
      await syncFs(target);
      await this.pool.snapshotDisk(id, snapID);
    } finally {
      if (running) thawCgroup(cgroup);
    }
    if (!opts.replay) return;
    const t0 = Date.now();
    await replayJournal(this.pool.snapshotPath(snapID)).then(
      () => this.log.debug({ sandboxID: id, snapshotID: snapID, ms: Date.now() - t0 }, "replayed a snapshot's journal"),
      (err: Error) => this.log.warn({ sandboxID: id, snapshotID: snapID, err: err.message }, "replaying a snapshot's journal failed"),
    );
  }

  /** Thaws every mounted sandbox disk under `sandboxesDir` (a crash between fsfreeze and thaw leaves one frozen). */
  async thawAll(sandboxesDir: string): Promise<void> {
    for (const id of readdirSync(sandboxesDir)) {
      const target = join(sandboxesDir, id, "disk");
      if (!isMounted(target)) continue;
      await thawFs(target).catch((err: Error) => this.log.error({ sandboxID: id, err: err.message }, "thawing a sandbox disk failed"));
    }
  }

  /** IDs of the sandbox disks in the pool. */
  ids(): string[] {
    return this.pool.listDisks();
  }
}

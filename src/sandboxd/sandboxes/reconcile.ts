import type { Lifecycle } from "./lifecycle.js";

/**
 * Brings the store and the runtime into agreement at start-up: a row still `starting` (sandboxd
 * died mid-create) or whose sandbox is gone or stopped is removed and deleted; a sandbox the store
 * does not know is removed; the rest keep their state (frozen or thawed to match the row), get
 * the runtime's current address and are published to the index. A sandbox paused to disk is kept
 * while its disk is there (whatever a crash left of a half-done pause or resume is stopped), and a
 * frozen one whose processes are gone (the host rebooted) but whose disk is there becomes paused
 * to disk. Leftovers of everything not kept are swept last.
 */
export async function reconcile(l: Lifecycle): Promise<void> {
  const { store, runtime, log } = l;
  const observed = new Map((await runtime.list()).map((o) => [o.sandboxID, o]));
  const disks = new Set(await runtime.disks());
  const keep = new Set<string>();
  for (const row of store.sandboxes.all()) {
    const o = observed.get(row.id);
    const gone = !o || o.status === "stopped";
    if (row.state === "paused" && disks.has(row.id) && (row.onDisk || gone)) {
      if (o) await runtime.stop(row.id, { keepDisk: true }).catch((err: Error) => log.error({ sandboxID: row.id, err: err.message }, "reconcile: stop failed"));
      if (!row.onDisk) log.info({ sandboxID: row.id }, "reconcile: a frozen sandbox whose processes are gone (host reboot) is now paused to disk");
      l.record({ ...row, onDisk: true, ip: null, envdPort: null });
      keep.add(row.id);
      continue;
    }
    if (row.state === "starting" || gone || row.onDisk) {
      await runtime.remove(row.id).catch((err: Error) => log.error({ sandboxID: row.id, err: err.message }, "reconcile: remove failed"));
      l.forget(row.id);
      log.info({ sandboxID: row.id, state: row.state, found: o?.status ?? (disks.has(row.id) ? "its disk" : "nothing") }, "reconcile: dropped a sandbox that did not survive");
      continue;
    }
    if (row.state === "paused" && o.status === "running") await runtime.freeze(row.id);
    if (row.state === "running" && o.status === "paused") await runtime.thaw(row.id);
    l.record({ ...row, ip: o.ip, envdPort: o.envdPort });
    keep.add(row.id);
  }
  for (const id of observed.keys()) {
    if (keep.has(id)) continue;
    await runtime.remove(id).catch((err: Error) => log.error({ sandboxID: id, err: err.message }, "reconcile: remove failed"));
    log.info({ sandboxID: id }, "reconcile: removed a sandbox the store does not know");
  }
  await runtime.sweep(keep);
  await reconcileSnapshots(l);
}

/**
 * Snapshots the store and the runtime agree on are kept: an image no row names (a crash between
 * the copy and the record, or a fork's own snapshot) is removed, and a row whose image is gone is
 * dropped.
 */
async function reconcileSnapshots(l: Lifecycle): Promise<void> {
  const images = new Set(await l.runtime.snapshots());
  const named = new Set<string>();
  for (const s of l.store.snapshots.all()) {
    if (images.has(s.image)) {
      named.add(s.image);
      continue;
    }
    l.store.snapshots.delete(s.id);
    l.log.warn({ snapshotID: s.id, name: s.name }, "reconcile: dropped a snapshot whose disk image is gone");
  }
  for (const image of images) {
    if (named.has(image)) continue;
    await l.runtime.removeSnapshot(image).catch((err: Error) => l.log.error({ image, err: err.message }, "reconcile: removing a snapshot image failed"));
    l.log.info({ image }, "reconcile: removed a snapshot image no snapshot names (half-made or a fork's)");
  }
}

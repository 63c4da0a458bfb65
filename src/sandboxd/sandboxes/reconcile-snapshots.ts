/** The snapshot half of the start-up reconcile: the store's snapshots and the runtime's images agree. */
import type { Lifecycle } from "./lifecycle.js";

/**
 * Snapshots the store and the runtime agree on are kept: an image no row names (a crash between
 * the copy and the record, or a fork's own snapshot) is removed, and a row whose image is gone is
 * dropped. Runs only at start-up: a live snapshot's or fork's image is named by no row for a while.
 */
export async function reconcileSnapshots(l: Lifecycle): Promise<void> {
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

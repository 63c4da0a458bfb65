import type { Lifecycle } from "./lifecycle.js";

/**
 * Brings the store and the runtime into agreement at start-up: a row still `starting` (sandboxd
 * died mid-create) or whose sandbox is gone or stopped is removed and deleted; a sandbox the store
 * does not know is removed; the rest keep their state (frozen or thawed to match the row), get
 * the runtime's current address and are published to the index. Leftovers of everything not kept
 * are swept last.
 */
export async function reconcile(l: Lifecycle): Promise<void> {
  const { store, runtime, log } = l;
  const observed = new Map((await runtime.list()).map((o) => [o.sandboxID, o]));
  const keep = new Set<string>();
  for (const row of store.sandboxes.all()) {
    const o = observed.get(row.id);
    if (row.state === "starting" || !o || o.status === "stopped") {
      await runtime.remove(row.id).catch((err: Error) => log.error({ sandboxID: row.id, err: err.message }, "reconcile: remove failed"));
      l.forget(row.id);
      log.info({ sandboxID: row.id, state: row.state, found: o?.status ?? "nothing" }, "reconcile: dropped a sandbox that did not survive");
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
}

/**
 * The reconcile loop: compares the store with what the runtime finds and brings them into
 * agreement. Its first pass runs at start-up (before the API serves) and also undoes what a crash
 * cut short; the passes after it run every few seconds beside the API and remove the sandboxes
 * whose processes died mid-life.
 */
import type { ObservedSandbox } from "../runtime/runtime.js";
import type { SandboxRow } from "../store/sandboxes.js";
import type { Lifecycle } from "./lifecycle.js";
import { reconcileSnapshots } from "./reconcile-snapshots.js";
import { phaseOf } from "./state.js";
import { killRow } from "./stop.js";

/**
 * One live pass: a running sandbox whose processes are gone (killed from the host, OOM, a crash of
 * its init) is removed as E2B removes a sandbox whose VM died, and a frozen one whose processes are
 * gone becomes paused to disk when its disk is there (else it is removed too). Each is checked
 * again in its own lane, so an operation that moved it meanwhile wins.
 */
export async function reconcileLive(l: Lifecycle): Promise<void> {
  // rows are read before the runtime is: a sandbox recorded as running then already had its container
  const rows = l.store.sandboxes.all().filter((r) => phaseOf(r) === "running" || phaseOf(r) === "paused");
  if (rows.length === 0) return;
  // the cheap look first; only a sandbox it finds dead costs the runtime's full look
  const alive = await l.runtime.alive();
  const dead = rows.filter((r) => !alive.has(r.id));
  if (dead.length === 0) return;
  const observed = new Map((await l.runtime.list()).map((o) => [o.sandboxID, o]));
  for (const row of dead) {
    const o = observed.get(row.id);
    if (o && o.status !== "stopped") continue;
    await l
      .serial(row.id, async () => {
        const cur = l.store.sandboxes.get(row.id);
        if (!cur || phaseOf(cur) !== phaseOf(row) || cur.startedAt !== row.startedAt) return;
        await dropDead(l, cur, o);
      })
      .catch((err: Error) => l.log.error({ sandboxID: row.id, err: err.message }, "reconcile: cleaning up a dead sandbox failed"));
  }
}

/** Removes a sandbox whose processes died, or keeps a frozen one's disk as a pause to disk. */
async function dropDead(l: Lifecycle, row: SandboxRow, o: ObservedSandbox | undefined): Promise<void> {
  const found = o?.status ?? "nothing";
  if (row.state === "paused" && (await l.runtime.disks()).includes(row.id)) {
    l.unroute(row);
    l.record({ ...row, onDisk: true, ip: null, envdPort: null });
    await l.runtime.stop(row.id, { keepDisk: true });
    l.log.warn({ sandboxID: row.id, found }, "reconcile: a frozen sandbox's processes are gone; it is paused to disk");
    return;
  }
  await killRow(l, row);
  l.log.warn({ sandboxID: row.id, state: row.state, found }, "reconcile: a sandbox's processes are gone; it was removed");
}

/**
 * The start-up pass. First, what a crash cut short is undone: a snapshot being copied is removed
 * (unless its record was already written: then it is finished) and its sandbox returns to the
 * phase it was in; a cold start is stopped and the sandbox is paused to disk again. Then: a row
 * still `starting` (a create cut short, a fork's too) or whose sandbox is gone or stopped is
 * removed and deleted; a sandbox the store does not know is removed; the rest keep their state
 * (frozen or thawed to match the row), get the runtime's current address and are published to
 * the index. A sandbox paused to disk is kept while its disk is there, and a frozen one whose
 * processes are gone (the host rebooted) but whose disk is there becomes paused to disk.
 * Leftovers of everything not kept are swept, and snapshot images no snapshot names removed.
 */
export async function reconcileAtStart(l: Lifecycle): Promise<void> {
  const { store, runtime, log } = l;
  const observed = new Map((await runtime.list()).map((o) => [o.sandboxID, o]));
  const disks = new Set(await runtime.disks());
  const keep = new Set<string>();
  for (const stored of store.sandboxes.all()) {
    const row = await undoTransition(l, stored);
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

/** Ends a transition a crash cut short: the row as recorded again, in the phase it returns to. */
async function undoTransition(l: Lifecycle, row: SandboxRow): Promise<SandboxRow> {
  if (!row.transition) return row;
  const image = row.transitionImage;
  const settled: SandboxRow = { ...row, transition: null, transitionImage: null };
  if (row.transition === "resuming") Object.assign(settled, { ip: null, envdPort: null });
  if (row.transition === "snapshotting" && image && !l.store.snapshots.all().some((s) => s.image === image)) {
    await l.runtime.removeSnapshot(image).catch((err: Error) => l.log.error({ image, err: err.message }, "reconcile: removing a half-made snapshot failed"));
  }
  l.record(settled);
  l.log.info({ sandboxID: row.id, cut: row.transition, back: phaseOf(settled) }, "reconcile: undid an operation a crash cut short");
  return settled;
}

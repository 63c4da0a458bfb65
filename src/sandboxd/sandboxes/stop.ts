/** Pausing (frozen in memory, or to disk) and killing a sandbox, by the API or by the evictor. */
import type { SandboxRow } from "../store/sandboxes.js";
import { Conflict, OperationFailed } from "../errors.js";
import type { Lifecycle } from "./lifecycle.js";

/**
 * Pauses a running sandbox: with `keepMemory` its processes are frozen in memory (resumed as they
 * were); without, it is paused to disk.
 */
export async function pauseRow(l: Lifecycle, row: SandboxRow, keepMemory: boolean): Promise<void> {
  if (!keepMemory) return pauseToDisk(l, row);
  await l.runtime.freeze(row.id);
  l.record({ ...row, state: "paused", endAt: new Date(l.clock.now()).toISOString() });
}

/**
 * Pauses a running or frozen sandbox to disk: its processes are stopped (what they had written is
 * on the disk, flushed as the disk is unmounted), its memory, CPU and network slot freed, and only
 * its disk kept; a resume cold-starts it there under the same ID. The row records it before the
 * runtime stops it, so a crash in between leaves a paused-to-disk row that start-up finishes.
 */
export async function pauseToDisk(l: Lifecycle, row: SandboxRow): Promise<void> {
  l.unroute(row);
  const next: SandboxRow = { ...row, state: "paused", onDisk: true, ip: null, envdPort: null, endAt: row.state === "paused" ? row.endAt : new Date(l.clock.now()).toISOString() };
  l.record(next);
  try {
    await l.runtime.stop(row.id, { keepDisk: true });
  } catch (err) {
    l.log.error({ sandboxID: row.id, err: (err as Error).message }, "pausing a sandbox to disk failed");
    throw new OperationFailed(`Failed to pause sandbox ${row.id} to disk: ${(err as Error).message}`);
  }
  l.log.info({ sandboxID: row.id }, "sandbox paused to disk");
}

/** Takes a sandbox off the routes, removes it from the runtime and forgets its row. */
export async function killRow(l: Lifecycle, row: SandboxRow): Promise<void> {
  l.unroute(row);
  try {
    await l.runtime.remove(row.id);
  } catch (err) {
    l.log.error({ sandboxID: row.id, err: (err as Error).message }, "removing a sandbox failed");
    throw new OperationFailed(`Failed to kill sandbox ${row.id}: ${(err as Error).message}`);
  }
  l.forget(row.id);
}

/** POST /sandboxes/{id}/pause (409 when already paused); `keepMemory` false pauses to disk. */
export function pauseSandbox(l: Lifecycle, teamID: string, id: string, keepMemory = true): Promise<void> {
  return l.lane(id, async () => {
    const row = l.owned(teamID, id);
    if (row.state === "paused") throw new Conflict(`Error pausing sandbox - sandbox '${id}' is already paused`);
    await pauseRow(l, row, keepMemory);
  });
}

/** DELETE /sandboxes/{id}. */
export function killSandbox(l: Lifecycle, teamID: string, id: string): Promise<void> {
  return l.lane(id, async () => killRow(l, l.owned(teamID, id)));
}

/** Pausing and killing a sandbox, by the API or by the evictor. */
import type { SandboxRow } from "../store/sandboxes.js";
import { Conflict, OperationFailed } from "../errors.js";
import type { Lifecycle } from "./lifecycle.js";

/** Freezes a sandbox and records it paused. */
export async function pauseRow(l: Lifecycle, row: SandboxRow): Promise<void> {
  await l.runtime.freeze(row.id);
  l.record({ ...row, state: "paused", endAt: new Date(l.clock.now()).toISOString() });
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

/** POST /sandboxes/{id}/pause (409 when already paused). */
export function pauseSandbox(l: Lifecycle, teamID: string, id: string): Promise<void> {
  return l.lane(id, async () => {
    const row = l.owned(teamID, id);
    if (row.state === "paused") throw new Conflict(`Error pausing sandbox - sandbox '${id}' is already paused`);
    await pauseRow(l, row);
  });
}

/** DELETE /sandboxes/{id}. */
export function killSandbox(l: Lifecycle, teamID: string, id: string): Promise<void> {
  return l.lane(id, async () => killRow(l, l.owned(teamID, id)));
}

/** A sandbox's outbound rules after it started: replaced by the API, re-applied at start-up. */
import { Conflict, OperationFailed } from "../errors.js";
import type { NetworkUpdate } from "./inputs.js";
import type { Lifecycle } from "./lifecycle.js";
import { withNetworkUpdate } from "./row-updates.js";

/** PUT /sandboxes/{id}/network: replaces a running sandbox's outbound rules (409 when not running). */
export function updateNetwork(l: Lifecycle, teamID: string, id: string, update: NetworkUpdate): Promise<void> {
  return l.lane(id, async () => {
    const row = l.owned(teamID, id);
    if (row.state !== "running") throw new Conflict(`Sandbox "${id}" is not running (it is ${row.state})`);
    const next = withNetworkUpdate(row, update);
    try {
      await l.runtime.setEgress(id, l.policyOf(next));
    } catch (err) {
      l.log.error({ sandboxID: id, err: (err as Error).message }, "updating a sandbox's network rules failed");
      throw new OperationFailed(`Failed to update the sandbox's network rules: ${(err as Error).message}`);
    }
    l.record(next);
    l.log.info({ sandboxID: id, allowOut: update.allowOut?.length ?? 0, denyOut: update.denyOut?.length ?? 0 }, "sandbox network rules replaced");
  });
}

/** Gives every live sandbox its recorded rules again (the resolver's and egress proxy's ports are new on every start). */
export async function reapplyEgress(l: Lifecycle): Promise<void> {
  for (const row of l.store.sandboxes.all()) {
    if ((row.state !== "running" && row.state !== "paused") || row.onDisk) continue;
    await l.runtime.setEgress(row.id, l.policyOf(row)).catch((err: Error) => l.log.error({ sandboxID: row.id, err: err.message }, "re-applying a sandbox's network rules failed"));
  }
}

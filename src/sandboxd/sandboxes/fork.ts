/**
 * POST /sandboxes/{id}/fork: one snapshot of a running sandbox's disk, then `count` sandboxes
 * started from it, each reported as made or failed; the parent runs on throughout. The snapshot
 * is the fork's own (never listed) and is removed once the forks have their copies.
 */
import { Conflict, DomainError, OperationFailed } from "../errors.js";
import { randomId } from "../store/seed.js";
import type { SnapshotRow } from "../store/snapshots.js";
import { createSandbox } from "./create.js";
import type { Lifecycle } from "./lifecycle.js";
import { templateOfRow } from "./row-template.js";
import { settled } from "./transitions.js";

/** The most forks one request may ask for. */
export const MAX_FORKS = 20;

/** How many forks start at once (each is a cold start on a reflinked disk). */
const FORKS_AT_ONCE = 4;

/** One fork's outcome: the sandbox's body, or the error that stopped it (the API answers it as the SDK's SandboxForkResult). */
export type ForkResult = { sandbox: Record<string, unknown> } | { error: unknown };

/**
 * Forks a running sandbox `count` times: the forks get the parent's files as they were at the
 * fork (writes after it stay each sandbox's own), its variables, metadata, network rules and
 * access settings, and `timeout` seconds to live.
 */
export async function forkSandbox(l: Lifecycle, teamID: string, id: string, count: number, timeout: number): Promise<ForkResult[]> {
  l.checkTimeout(teamID, timeout);
  const { parent, snap } = await l.lane(id, async () => {
    const row = l.owned(teamID, id);
    if (row.state !== "running") throw new Conflict(`Sandbox ${id} is ${row.state}; only a running sandbox can be forked`);
    const template = templateOfRow(l.store, row);
    const image = "f" + randomId(20);
    // the parent is snapshotting while its disk is copied: a crash then removes the copy at start-up
    l.record({ ...row, transition: "snapshotting", transitionImage: image });
    try {
      const { sizeBytes } = await l.runtime.snapshot(row.id, image, { copies: count });
      const s: SnapshotRow = { id: image, teamID, name: null, sourceSandboxID: row.id, templateID: row.templateID, buildID: template.buildID, image, template, sizeBytes, createdAt: new Date(l.clock.now()).toISOString() };
      return { parent: row, snap: s };
    } catch (err) {
      await l.runtime.removeSnapshot(image).catch(() => undefined);
      throw new OperationFailed(`Failed to fork sandbox ${id}: taking its snapshot failed: ${(err as Error).message}`);
    } finally {
      l.record(settled(l, id));
    }
  });
  // held while the forks copy it; retired at once, so the last create's release removes it
  l.snapshotUse.hold(snap.image);
  const results: ForkResult[] = new Array(count);
  try {
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < count; i = next++) {
        results[i] = await createSandbox(l, teamID, {
          templateID: snap.id, timeout, secure: parent.secure, metadata: parent.metadata, envVars: parent.envVars ?? undefined,
          network: parent.network, allowInternetAccess: parent.allowInternetAccess,
        }, snap).then(
          (sandbox) => ({ sandbox }),
          (err: unknown) => {
            if (!(err instanceof DomainError)) l.log.error({ sandboxID: id, err: (err as Error).message }, "a fork failed");
            return { error: err };
          },
        );
      }
    };
    await Promise.all(Array.from({ length: Math.min(FORKS_AT_ONCE, count) }, worker));
  } finally {
    await l.snapshotUse.retire(snap.image);
    await l.snapshotUse.release(snap.image).catch((err: Error) => l.log.error({ sandboxID: id, err: err.message }, "removing a fork's snapshot failed"));
  }
  l.log.info({ sandboxID: id, count, made: results.filter((r) => "sandbox" in r).length }, "sandbox forked");
  return results;
}

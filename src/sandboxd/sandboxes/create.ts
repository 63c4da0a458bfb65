/** POST /sandboxes: a create, from the checked request to the running sandbox's body. */
import { newSandboxID } from "../pool/spec.js";
import type { SandboxRow } from "../store/sandboxes.js";
import { admit, checkSize, fits, reserved, type Resources } from "./budget.js";
import { Invalid, LimitExceeded, OperationFailed } from "../errors.js";
import type { CreateInput } from "./inputs.js";
import { launch } from "./launch.js";
import type { Lifecycle } from "./lifecycle.js";
import { resolveTemplate, versionAtLeast } from "./resolve.js";
import { trafficAccessToken } from "./tokens.js";
import { sandboxBody } from "./views.js";
import { findSnapshot } from "./snapshots.js";
import type { SnapshotRow } from "../store/snapshots.js";
import type { Template } from "../store/templates.js";

/**
 * A create of a template or, when `input.templateID` names one of the team's snapshots (or
 * `snapshot` is given), of a snapshot: the snapshot is held (not deletable) until the create ends.
 */
export async function createSandbox(l: Lifecycle, teamID: string, input: CreateInput, snapshot?: SnapshotRow): Promise<Record<string, unknown>> {
  const snap = snapshot ?? findSnapshot(l.store, teamID, input.templateID);
  if (!snap) return createFrom(l, teamID, input, resolveTemplate(l.store, teamID, input.templateID));
  l.snapshotUse.hold(snap.image);
  try {
    return await createFrom(l, teamID, input, snap.template, snap);
  } finally {
    await l.snapshotUse.release(snap.image).catch((err: Error) => l.log.error({ snapshotID: snap.id, err: err.message }, "removing a deleted snapshot failed"));
  }
}

/**
 * Checks the request, records the sandbox as starting (within the team's limit), then starts it
 * (from a snapshot's disk; else claimed from the warm pool when one of its template build waits,
 * cold otherwise), initializes envd, runs the template's start command and records it running.
 * A failed start leaves nothing behind.
 */
async function createFrom(l: Lifecycle, teamID: string, input: CreateInput, tpl: Template, snap?: SnapshotRow): Promise<Record<string, unknown>> {
  const { store, runtime, log, clock } = l;
  const t0 = clock.now();
  const timeout = input.timeout;
  l.checkTimeout(teamID, timeout);
  const network = { ...(input.network ?? {}) };
  const publicTraffic = network.allowPublicTraffic !== false;
  if (!publicTraffic && !input.secure) throw new Invalid("You cannot create a sandbox without public access unless you enable secure envd access via 'secure' flag.");
  if (input.secure && !versionAtLeast(tpl.envdVersion, "0.2.0")) throw new Invalid(`Template '${input.templateID}' must be rebuilt for secure sandbox access (its envd is older than 0.2.0)`);
  const max = store.teams.get(teamID)?.maxConcurrent ?? 100;
  const need: Resources = { memoryMB: tpl.memoryMB, diskMB: tpl.diskSizeMB };
  checkSize(l.budget, input.templateID, need);
  const pooled = snap ? undefined : await l.warm.take(tpl);
  // The pool's sandboxes count against the host budget (a claimed one has left it); pooled
  // sandboxes of other templates give way to a create that would not fit beside them.
  const hostUsed = (): Resources => {
    const rows = reserved(l.rows.all());
    const pool = l.warm.pool.reserved();
    return { memoryMB: rows.memoryMB + pool.memoryMB, diskMB: rows.diskMB + pool.diskMB };
  };
  if (!fits(hostUsed(), need, l.budget.host)) await l.warm.pool.shed(() => fits(hostUsed(), need, l.budget.host));
  const id = pooled?.sandboxID ?? newSandboxID();
  const now = new Date(clock.now()).toISOString();
  const row: SandboxRow = {
    id, teamID, templateID: tpl.id, state: "starting", startedAt: now, endAt: now, metadata: input.metadata ?? {}, autoPause: input.autoPause ?? false, autoResume: input.autoResume ?? false,
    secure: input.secure, trafficToken: publicTraffic ? null : trafficAccessToken(l.secret(), id), network, allowInternetAccess: input.allowInternetAccess ?? true,
    ip: null, envdPort: null, envdVersion: tpl.envdVersion, cpuCount: tpl.cpuCount, memoryMB: tpl.memoryMB, diskSizeMB: tpl.diskSizeMB,
    buildID: tpl.buildID, rootfs: tpl.rootfs, envVars: { ...(tpl.envs ?? {}), ...(input.envVars ?? {}) }, autoPauseMemory: input.autoPauseMemory ?? true,
  };
  const egress = l.policyOf(row);
  try {
    store.transaction(() => {
      if (store.sandboxes.countLive(teamID) >= max) {
        throw new LimitExceeded(`you have reached the maximum number of concurrent E2B sandboxes (${max}). If you need more, please visit 'https://e2b.dev/docs/billing'`);
      }
      admit(l.budget, hostUsed(), reserved(l.rows.sorted(teamID).map((r) => r.row)), need);
      l.record(row);
      store.templates.spawned(tpl.id, now);
    });
  } catch (err) {
    if (pooled) l.warm.pool.giveBack(pooled);
    throw err;
  }
  l.activity.creating++;
  return l.serial(id, async () => {
    let phase = "starting the sandbox";
    try {
      const { reported, claimed } = await launch(l, {
        warm: pooled, sandboxID: id, tpl, egress, fromSnapshot: snap?.image,
        init: (a) => {
          row.ip = a.ip;
          row.envdPort = a.envdPort;
          phase = "initializing envd";
          return l.init(row, tpl, row.envVars ?? {});
        },
      });
      phase = "running the template's start and ready commands";
      await l.envdOf(row).startCommand({ user: tpl.defaultUser ?? "user", cwd: tpl.defaultWorkdir ?? undefined }, tpl.startCmd, tpl.readyCmd);
      const t = clock.now();
      // The version recorded for the template is what E2B's API reports (the SDK gates features
      // on it); envd's own header is the fallback for a template that records none.
      Object.assign(row, { state: "running", envdVersion: tpl.envdVersion || reported || "0.1.0", startedAt: new Date(t).toISOString(), endAt: new Date(t + timeout * 1000).toISOString() });
      l.record(row);
      l.onStarted?.(teamID);
      log.info({ sandboxID: id, templateID: tpl.id, ms: clock.now() - t0, fromPool: claimed, ...(snap ? { snapshotID: snap.id } : {}) }, "sandbox created");
      return sandboxBody(row, tpl, l.tokenOf(row));
    } catch (err) {
      log.error({ sandboxID: id, phase, err: (err as Error).message }, "sandbox create failed");
      l.unroute(row);
      await runtime.remove(id).catch((e: Error) => log.error({ sandboxID: id, err: e.message }, "removing a failed sandbox failed"));
      l.forget(id);
      throw new OperationFailed(`Failed to create sandbox: ${phase} failed: ${(err as Error).message}`, "sandbox_create_failed");
    } finally {
      l.activity.creating--;
      l.activity.lastCreated = clock.now();
    }
  });
}

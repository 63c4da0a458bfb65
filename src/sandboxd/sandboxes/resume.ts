/** Bringing a paused sandbox back: connect (resumes a paused one or extends a running one), resume, and resume on traffic. */
import type { SandboxRow } from "../store/sandboxes.js";
import { Conflict, Invalid, OperationFailed } from "../errors.js";
import { specOf } from "../pool/spec.js";
import type { Lifecycle } from "./lifecycle.js";
import { templateOfRow } from "./row-template.js";
import { pauseToDisk } from "./stop.js";
import { sandboxBody } from "./views.js";

type Body = Record<string, unknown>;

/** How long a sandbox resumed by traffic runs before its timeout applies again (the SDK's connect default). */
const AUTO_RESUME_TIMEOUT_S = 300;

/** How a paused sandbox comes back: its memory restored (a frozen one), or a cold start on its disk. */
export interface ResumeOptions {
  timeout: number;
  autoPause?: boolean;
  /** false (the SDK's onResume 'reboot'): a frozen sandbox is stopped and cold-started on its disk too. */
  memory?: boolean;
}

/** Resumes a paused sandbox for `timeout` s: thawed when frozen in memory, else cold-started on its own disk. */
export async function resumePaused(l: Lifecycle, row: SandboxRow, o: ResumeOptions): Promise<Body> {
  if (!row.onDisk && o.memory === false) {
    await pauseToDisk(l, row);
    row = l.store.sandboxes.get(row.id)!;
  }
  if (row.onDisk) return coldStart(l, row, o);
  await l.runtime.thaw(row.id);
  const tpl = l.store.templates.get(row.templateID);
  await l.init(row, tpl, undefined, 3000).catch((err: Error) => {
    l.log.warn({ sandboxID: row.id, err: err.message }, "envd /init after resume failed; the sandbox runs with its earlier init");
  });
  const t = l.clock.now();
  const next: SandboxRow = { ...row, state: "running", startedAt: new Date(t).toISOString(), endAt: new Date(t + o.timeout * 1000).toISOString(), autoPause: o.autoPause ?? row.autoPause };
  l.record(next);
  return sandboxBody(next, tpl, l.tokenOf(next));
}

/**
 * Starts a sandbox paused to disk again: a new container on its own disk, under the same ID, with
 * the variables its create gave envd, its token, metadata and network rules; the template's start
 * command runs again. A failed start leaves it paused on its disk.
 */
async function coldStart(l: Lifecycle, row: SandboxRow, o: ResumeOptions): Promise<Body> {
  const tpl = templateOfRow(l.store, row);
  const t0 = l.clock.now();
  let phase = "starting the sandbox on its disk";
  // the store shows the cold start under way: a crash in the middle of it is undone at start-up
  l.record({ ...row, transition: "resuming" });
  try {
    const addr = await l.runtime.create({ ...specOf(row.id, tpl, l.policyOf(row)), keptDisk: true });
    const up: SandboxRow = { ...row, ip: addr.ip, envdPort: addr.envdPort };
    phase = "initializing envd";
    await l.init(up, tpl, row.envVars ?? tpl.envs ?? {});
    phase = "running the template's start and ready commands";
    await l.envdOf(up).startCommand({ user: tpl.defaultUser ?? "user", cwd: tpl.defaultWorkdir ?? undefined }, tpl.startCmd, tpl.readyCmd);
    const t = l.clock.now();
    const next: SandboxRow = { ...up, state: "running", onDisk: false, transition: null, startedAt: new Date(t).toISOString(), endAt: new Date(t + o.timeout * 1000).toISOString(), autoPause: o.autoPause ?? row.autoPause };
    l.record(next);
    l.log.info({ sandboxID: row.id, ms: l.clock.now() - t0 }, "sandbox resumed from disk");
    return sandboxBody(next, l.store.templates.get(row.templateID), l.tokenOf(next));
  } catch (err) {
    l.log.error({ sandboxID: row.id, phase, err: (err as Error).message }, "resuming a sandbox from disk failed");
    await l.runtime.stop(row.id, { keepDisk: true }).catch((e: Error) => l.log.error({ sandboxID: row.id, err: e.message }, "stopping a failed resume failed"));
    l.record({ ...row, transition: null });
    throw new OperationFailed(`Failed to resume sandbox ${row.id} from disk: ${phase} failed: ${(err as Error).message}`);
  }
}

/** POST /sandboxes/{id}/connect: resumes a paused sandbox (201) or extends a running one's timeout (200). */
export function connectSandbox(l: Lifecycle, teamID: string, id: string, timeout: number, memory?: boolean): Promise<{ status: 200 | 201; body: Body }> {
  return l.lane(id, async () => {
    const row = l.owned(teamID, id);
    if (timeout * 1000 > l.maxLengthMs(teamID)) throw new Invalid(`Timeout cannot be greater than ${l.maxLengthMs(teamID) / 3600_000} hours`);
    if (row.state === "paused") return { status: 201 as const, body: await resumePaused(l, row, { timeout: Math.max(timeout, 1), memory }) };
    l.keepAlive(row, timeout, false);
    const cur = l.store.sandboxes.get(id)!;
    return { status: 200 as const, body: sandboxBody(cur, l.store.templates.get(cur.templateID), l.tokenOf(cur)) };
  });
}

/** POST /sandboxes/{id}/resume: a paused sandbox runs again (409 when it already runs). */
export function resumeSandbox(l: Lifecycle, teamID: string, id: string, o: ResumeOptions): Promise<Body> {
  return l.lane(id, async () => {
    const row = l.owned(teamID, id);
    l.checkTimeout(teamID, o.timeout);
    if (row.state === "running") throw new Conflict(`Sandbox ${id} is already running`);
    return resumePaused(l, row, o);
  });
}

/**
 * Resumes a sandbox frozen in memory, created with autoResume, because traffic came for it (the
 * proxy's call), for AUTO_RESUME_TIMEOUT_S; true once it runs. One paused to disk is not
 * resumed by traffic (it must be resumed explicitly). Concurrent calls share its lane.
 */
export function resumeOnTraffic(l: Lifecycle, id: string): Promise<boolean> {
  return l.lane(id, async () => {
    const row = l.store.sandboxes.get(id);
    if (!row || !row.autoResume || row.onDisk) return false;
    if (row.state === "paused") {
      await resumePaused(l, row, { timeout: AUTO_RESUME_TIMEOUT_S });
      l.log.info({ sandboxID: id }, "sandbox resumed by traffic");
    }
    return l.store.sandboxes.get(id)?.state === "running";
  });
}

/** Bringing a paused sandbox back: resume, connect (which resumes a paused one) and resume on traffic. */
import type { SandboxRow } from "../store/sandboxes.js";
import { Conflict, Invalid } from "../errors.js";
import type { Lifecycle } from "./lifecycle.js";
import { sandboxBody } from "./views.js";

type Body = Record<string, unknown>;

/** How long a sandbox resumed by traffic runs before its timeout applies again (the SDK's connect default). */
const AUTO_RESUME_TIMEOUT_S = 300;

/** Thaws a paused sandbox, re-runs envd's /init (best effort) and records it running for `timeout` s. */
export async function resumePaused(l: Lifecycle, row: SandboxRow, timeout: number, autoPause?: boolean): Promise<Body> {
  await l.runtime.thaw(row.id);
  const tpl = l.store.templates.get(row.templateID);
  await l.init(row, tpl, undefined, 3000).catch((err: Error) => {
    l.log.warn({ sandboxID: row.id, err: err.message }, "envd /init after resume failed; the sandbox runs with its earlier init");
  });
  const t = l.clock.now();
  const next: SandboxRow = { ...row, state: "running", startedAt: new Date(t).toISOString(), endAt: new Date(t + timeout * 1000).toISOString(), autoPause: autoPause ?? row.autoPause };
  l.record(next);
  return sandboxBody(next, tpl, l.tokenOf(next));
}

/** POST /sandboxes/{id}/connect: resumes a paused sandbox (201) or extends a running one's timeout (200). */
export function connectSandbox(l: Lifecycle, teamID: string, id: string, timeout: number): Promise<{ status: 200 | 201; body: Body }> {
  return l.lane(id, async () => {
    const row = l.owned(teamID, id);
    if (timeout * 1000 > l.maxLengthMs(teamID)) throw new Invalid(`Timeout cannot be greater than ${l.maxLengthMs(teamID) / 3600_000} hours`);
    if (row.state === "paused") return { status: 201 as const, body: await resumePaused(l, row, Math.max(timeout, 1)) };
    l.keepAlive(row, timeout, false);
    const cur = l.store.sandboxes.get(id)!;
    return { status: 200 as const, body: sandboxBody(cur, l.store.templates.get(cur.templateID), l.tokenOf(cur)) };
  });
}

/** POST /sandboxes/{id}/resume: a paused sandbox runs again (409 when it already runs). */
export function resumeSandbox(l: Lifecycle, teamID: string, id: string, timeout: number, autoPause?: boolean): Promise<Body> {
  return l.lane(id, async () => {
    const row = l.owned(teamID, id);
    l.checkTimeout(teamID, timeout);
    if (row.state === "running") throw new Conflict(`Sandbox ${id} is already running`);
    return resumePaused(l, row, timeout, autoPause);
  });
}

/**
 * Resumes a paused sandbox created with autoResume because traffic came for it (the proxy's
 * call), for AUTO_RESUME_TIMEOUT_S; true once it runs. Concurrent calls share its lane.
 */
export function resumeOnTraffic(l: Lifecycle, id: string): Promise<boolean> {
  return l.lane(id, async () => {
    const row = l.store.sandboxes.get(id);
    if (!row || !row.autoResume) return false;
    if (row.state === "paused") {
      await resumePaused(l, row, AUTO_RESUME_TIMEOUT_S);
      l.log.info({ sandboxID: id }, "sandbox resumed by traffic");
    }
    return l.store.sandboxes.get(id)?.state === "running";
  });
}

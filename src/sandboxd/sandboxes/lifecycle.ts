/**
 * The owner of the sandbox lifecycle: the store's rows, the proxy's index, the egress map, the
 * per-sandbox lanes, the runtime, envd's client, the budget and the warm pool's wiring. The
 * operations (create, connect, resume, pause, kill, evict, reconcile) live in files of their own
 * and act through it; `record` is the one place a sandbox's row, and so its state, changes.
 */
import { realClock, type Clock } from "../clock.js";
import { connectEnvd, type EnvdClient, type EnvdConnector } from "../envd-client/client.js";
import { ENVD_PORT } from "../envd-client/port.js";
import type { Logger } from "../log.js";
import { egressPolicy, type EgressPolicy } from "../network/policy.js";
import { sandboxEnv } from "../pool/spec.js";
import { createTemplatePool, type TemplatePool } from "../pool/warm-templates.js";
import { httpsPortsOf } from "../proxy/target.js";
import type { Runtime } from "../runtime/runtime.js";
import { createSerializer } from "../serial.js";
import type { SandboxRow } from "../store/sandboxes.js";
import { installSecret } from "../store/seed.js";
import type { Store } from "../store/store.js";
import type { Template } from "../store/templates.js";
import { fits, reserved, type Budget, type Resources } from "./budget.js";
import { sandboxNotFound } from "../errors.js";
import { createRowMirror, createSandboxIndex, type RowMirror } from "./index.js";
import { checkTimeoutFor, keptAliveUntil } from "./row-updates.js";
import { SnapshotUse } from "./snapshot-use.js";
import { canMove, phaseOf, type SandboxState } from "./state.js";
import { envdAccessToken } from "./tokens.js";

/** What the lifecycle is built over. */
export interface LifecycleOptions {
  store: Store;
  runtime: Runtime;
  log: Logger;
  /** What sandboxes may reserve: creates past it get 429, and the warm pool fills only below it. */
  budget: Budget;
  /** Started sandboxes kept per warm template (0: none); the default template is always kept warm. */
  warmPoolSize?: number;
  defaultTemplateID?: string;
  onStarted?: (teamID: string) => void;
  /** Snapshots one team may keep (default 100). */
  maxSnapshots?: number;
  /** The real clock and envd client when not given. */
  clock?: Clock;
  envd?: EnvdConnector;
}

/** Refills wait this long after a create: its caller's first requests come next. */
const QUIET_AFTER_CREATE_MS = 100;

/** The sandbox lifecycle's state and the steps every operation shares. */
export class Lifecycle {
  readonly store: Store;
  readonly runtime: Runtime;
  readonly log: Logger;
  readonly clock: Clock;
  readonly budget: Budget;
  readonly onStarted?: (teamID: string) => void;
  /** Routable sandboxes, as the proxy reads them. */
  readonly index = createSandboxIndex();
  /** The store's rows held in memory for the API's lists (every write below touches it). */
  readonly rows: RowMirror;
  /** One lane per sandbox ID: its operations run one after another. */
  readonly serial = createSerializer();
  readonly warm: TemplatePool;
  /** Creates in flight and when the last ended (the pool's refills wait on them). */
  readonly activity = { creating: 0, lastCreated: 0 };
  /** Snapshots one team may keep. */
  readonly maxSnapshots: number;
  /** Snapshot images creates are copying now (not deletable meanwhile). */
  readonly snapshotUse: SnapshotUse;
  private readonly envd: EnvdConnector;
  /** Running sandboxes' outbound rules by address, kept beside the index. */
  private readonly egressByIp = new Map<string, EgressPolicy>();
  private readonly inflight = new Set<Promise<unknown>>();
  private readonly stopBackground: (() => void)[] = [];
  private closed = false;

  constructor(o: LifecycleOptions) {
    this.store = o.store;
    this.rows = createRowMirror(o.store.sandboxes);
    this.runtime = o.runtime;
    this.log = o.log;
    this.budget = o.budget;
    this.onStarted = o.onStarted;
    this.clock = o.clock ?? realClock;
    this.envd = o.envd ?? connectEnvd;
    this.maxSnapshots = o.maxSnapshots ?? 100;
    this.snapshotUse = new SnapshotUse((image) => o.runtime.removeSnapshot(image));
    this.warm = createTemplatePool({
      store: o.store, runtime: o.runtime, envd: this.envd, log: o.log, clock: this.clock, size: o.warmPoolSize ?? 0, defaultTemplateID: o.defaultTemplateID,
      foregroundBusy: () => this.activity.creating > 0 || this.clock.now() - this.activity.lastCreated < QUIET_AFTER_CREATE_MS,
      // A refill leaves room for one more sandbox of its size beside it, so a create never finds the
      // last of the budget taken by the pool (and a create that still does not fit sheds pooled ones).
      admit: (need: Resources, pooled: Resources) =>
        fits(reserved(this.rows.all()), { memoryMB: pooled.memoryMB + 2 * need.memoryMB, diskMB: pooled.diskMB + 2 * need.diskMB }, this.budget.host),
    });
  }

  /** Keeps `p` among the operations close() waits for. */
  track<T>(p: Promise<T>): Promise<T> {
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p)).catch(() => undefined);
    return p;
  }

  /** Runs `fn` in sandbox `id`'s lane, tracked. */
  lane<T>(id: string, fn: () => Promise<T>): Promise<T> {
    return this.track(this.serial(id, fn));
  }

  /**
   * Writes a sandbox's row (inserted when new) and publishes it to the index and the egress map:
   * the one place a sandbox's phase changes. A move the state machine (state.ts) does not have is a bug.
   */
  record(next: SandboxRow): void {
    const prev = this.store.sandboxes.get(next.id);
    if (!canMove(prev, next)) throw new Error(`sandbox ${next.id} cannot go from ${prev ? phaseOf(prev) : "nothing"} to ${phaseOf(next)}`);
    if (prev) this.store.sandboxes.update(next);
    else this.store.sandboxes.insert(next);
    this.rows.touch(next.id);
    this.publish(next);
  }

  /** Takes a sandbox out of the index and the egress map (before it is removed). */
  unroute(row: SandboxRow): void {
    this.index.delete(row.id);
    if (row.ip) this.egressByIp.delete(row.ip);
  }

  /** Deletes a removed sandbox's row. */
  forget(id: string): void {
    this.store.sandboxes.delete(id);
    this.rows.touch(id);
  }

  /** The outbound rules of the running sandbox at `ip`. */
  egressOf(ip: string): EgressPolicy | undefined {
    return this.egressByIp.get(ip);
  }

  /** A team's sandbox in one of `states`; anything else is the API's not-found. */
  owned(teamID: string, id: string, states: SandboxState[] = ["running", "paused"]): SandboxRow {
    const row = this.store.sandboxes.get(id);
    if (!row || row.teamID !== teamID || !states.includes(row.state)) throw sandboxNotFound(id);
    return row;
  }

  /** The install's secret (the root of envd and traffic tokens). */
  secret(): string {
    return installSecret(this.store);
  }

  /** envd's access token of a secure sandbox. */
  tokenOf(row: SandboxRow): string | undefined {
    return row.secure ? envdAccessToken(this.secret(), row.id) : undefined;
  }

  /** A sandbox's outbound rules as its row records them. */
  policyOf(row: SandboxRow): EgressPolicy {
    return egressPolicy({ allowOut: row.network.allowOut as string[] | undefined, denyOut: row.network.denyOut as string[] | undefined, allowInternetAccess: row.allowInternetAccess });
  }

  /** The longest a team's sandbox may live, ms. */
  maxLengthMs(teamID: string): number {
    return (this.store.teams.get(teamID)?.maxLengthHours ?? 24) * 3600_000;
  }

  /** Refuses a timeout the team may not have. */
  checkTimeout(teamID: string, timeoutS: number): void {
    checkTimeoutFor(this.maxLengthMs(teamID), timeoutS);
  }

  /** Moves a running sandbox's end to `timeoutS` from now (E2B's KeepAliveFor). */
  keepAlive(row: SandboxRow, timeoutS: number, allowShorter: boolean): void {
    this.record({ ...row, endAt: keptAliveUntil(row, this.maxLengthMs(row.teamID), timeoutS, allowShorter, this.clock.now()) });
  }

  /** A client of the sandbox's envd at its recorded address. */
  envdOf(row: SandboxRow): EnvdClient {
    return this.envd({ ip: row.ip!, port: row.envdPort ?? ENVD_PORT, accessToken: this.tokenOf(row) });
  }

  /** Calls envd's /init; `envVars` undefined (a resume) leaves envd's variables as the create set them. */
  init(row: SandboxRow, tpl: Template | undefined, envVars: Record<string, string> | undefined, totalMs?: number): Promise<string | undefined> {
    return this.envdOf(row).init({
      envVars: envVars && { ...envVars, ...sandboxEnv(row.id, row.templateID) },
      defaultUser: tpl?.defaultUser ?? undefined, defaultWorkdir: tpl?.defaultWorkdir ?? undefined,
    }, totalMs);
  }

  /** Runs each pass every its own `everyMs` (each one at a time, tracked) and starts the pool's refills. */
  startBackground(passes: { everyMs: number; pass: () => Promise<void> }[]): void {
    if (this.stopBackground.length > 0 || this.closed) return;
    this.warm.pool.start();
    for (const { everyMs, pass } of passes) {
      let busy = false;
      this.stopBackground.push(this.clock.every(everyMs, () => {
        if (busy || this.closed) return;
        busy = true;
        // a pass that fails is logged and tried again at its next turn, never left unhandled
        void this.track(pass())
          .catch((err: unknown) => this.log.error({ err: err instanceof Error ? err.message : String(err) }, "a background pass failed"))
          .finally(() => (busy = false));
      }));
    }
  }

  /** Stops the background work, removes the pool's sandboxes and waits for operations in flight. */
  async close(): Promise<void> {
    this.closed = true;
    for (const stop of this.stopBackground) stop();
    await Promise.allSettled([...this.inflight, this.warm.pool.close()]);
  }

  private publish(row: SandboxRow): void {
    if (row.ip) this.egressByIp.delete(row.ip);
    if (row.ip && row.state === "running") this.egressByIp.set(row.ip, this.policyOf(row));
    if (!row.ip || row.state === "starting") return this.index.delete(row.id);
    const net = row.network as { maskRequestHost?: string };
    const envdPort = row.envdPort ?? ENVD_PORT;
    const httpsPorts = httpsPortsOf(row.network, envdPort);
    this.index.set({ sandboxID: row.id, state: row.state, ip: row.ip, envdPort, ...(row.autoResume ? { autoResume: true } : {}), ...(row.trafficToken ? { trafficAccessToken: row.trafficToken } : {}), ...(net.maskRequestHost ? { maskRequestHost: net.maskRequestHost } : {}), ...(httpsPorts.length > 0 ? { httpsPorts } : {}) });
  }
}

/**
 * The sandbox service the API and the proxy use: a thin face over the lifecycle owner, one line
 * per operation.
 */
import type { EgressPolicy } from "../network/policy.js";
import type { WarmPool } from "../pool/warm-pool.js";
import { createSandbox } from "./create.js";
import { evictExpired } from "./evict.js";
import type { RowMirror, SandboxIndex } from "./index.js";
import type { CreateInput, ListQuery, NetworkUpdate } from "./inputs.js";
import { Lifecycle, type LifecycleOptions } from "./lifecycle.js";
import { reapplyEgress, updateNetwork } from "./network.js";
import { consoleOutput, getSandbox, listV1, listV2 } from "./queries.js";
import { reconcileAtStart, reconcileLive } from "./reconcile.js";
import { templateAliasBody } from "./resolve.js";
import { connectSandbox, resumeOnTraffic, resumeSandbox } from "./resume.js";
import { killSandbox, pauseSandbox } from "./stop.js";
import { forkSandbox, type ForkResult } from "./fork.js";
import { deleteSnapshot, listSnapshots, takeSnapshot, type SnapshotInfo, type SnapshotQuery } from "./snapshots.js";

type Body = Record<string, unknown>;

/** How often the reconcile loop compares the store with the runtime by default, ms. */
export const DEFAULT_RECONCILE_MS = 2000;

/** The sandbox lifecycle: every operation of the control API on sandboxes, for a team. */
export interface SandboxService {
  index: SandboxIndex;
  /** The store's sandbox rows held in memory (every write of the lifecycle keeps it in step): for readers of every row. */
  rows: RowMirror;
  /** Brings the store, the index and the runtime into agreement at start-up, undoing what a crash cut short. */
  reconcile(): Promise<void>;
  create(teamID: string, input: CreateInput): Promise<Body>;
  get(teamID: string, id: string): Body;
  /** The tail of a running or paused sandbox's console output (envd's log lines), with when it started. */
  consoleOutput(teamID: string, id: string, maxBytes: number): Promise<{ bytes: Buffer; startedAt: string }>;
  listV1(teamID: string, metadata: [string, string][]): Body[];
  listV2(teamID: string, q: ListQuery): { items: Body[]; nextToken?: string; totalRunning?: number };
  /** `memory` false (onResume 'reboot'): a paused sandbox is cold-started on its disk, even one frozen in memory. */
  connect(teamID: string, id: string, timeout: number, memory?: boolean): Promise<{ status: 200 | 201; body: Body }>;
  resume(teamID: string, id: string, timeout: number, autoPause?: boolean, memory?: boolean): Promise<Body>;
  /** `keepMemory` false pauses to disk: memory and CPU freed, resumed by a cold start. */
  pause(teamID: string, id: string, keepMemory?: boolean): Promise<void>;
  setTimeout(teamID: string, id: string, timeout: number): Promise<void>;
  refresh(teamID: string, id: string, duration: number): Promise<void>;
  kill(teamID: string, id: string): Promise<void>;
  /** POST /sandboxes/{id}/snapshots: a snapshot of a running or paused sandbox's disk, named or not. */
  snapshot(teamID: string, id: string, name: string | undefined): Promise<SnapshotInfo>;
  /** GET /snapshots: one page of the team's snapshots. */
  listSnapshots(teamID: string, q: SnapshotQuery): { items: SnapshotInfo[]; nextToken?: string };
  /** Deletes the team's snapshot a reference names; false when there is none (409 while a create copies it). */
  deleteSnapshot(teamID: string, ref: string): Promise<boolean>;
  /** POST /sandboxes/{id}/fork: `count` sandboxes from one snapshot of a running sandbox, each made or failed. */
  fork(teamID: string, id: string, count: number, timeout: number): Promise<ForkResult[]>;
  /**
   * Resumes a paused sandbox created with autoResume because traffic came for it (the proxy's
   * call), for AUTO_RESUME_TIMEOUT_S; true once it runs. Concurrent calls share one resume.
   */
  resumeOnTraffic(id: string): Promise<boolean>;
  /** PUT /sandboxes/{id}/network: replaces a running sandbox's outbound rules (409 when not running). */
  updateNetwork(teamID: string, id: string, update: NetworkUpdate): Promise<void>;
  /** The outbound rules of the running sandbox at `ip` (the egress proxy's and resolver's lookup). */
  egressOf(ip: string): EgressPolicy | undefined;
  /** GET /templates/aliases/{alias}: the template an alias names (403 if another team's). */
  templateByAlias(teamID: string, alias: string): Body;
  /** Started sandboxes waiting for a create to claim them. */
  pool: WarmPool;
  /**
   * Starts the evictor (expired sandboxes are killed, or paused with autoPause), the reconcile
   * loop's live passes (sandboxes whose processes died are removed) and the warm pool's refills.
   */
  startBackground(o?: { evictEveryMs?: number; reconcileEveryMs?: number }): void;
  /** Stops the evictor, removes the pool's sandboxes and waits for operations in flight; created sandboxes keep running. */
  close(): Promise<void>;
}

/** Creates the service over a store and a runtime; call reconcile() before serving. */
export function createSandboxService(opts: LifecycleOptions): SandboxService {
  const l = new Lifecycle(opts);
  return {
    index: l.index,
    rows: l.rows,
    async reconcile() {
      await reconcileAtStart(l);
      await reapplyEgress(l);
    },
    egressOf: (ip) => l.egressOf(ip),
    create: (teamID, input) => l.track(createSandbox(l, teamID, input)),
    get: (teamID, id) => getSandbox(l, teamID, id),
    resumeOnTraffic: (id) => resumeOnTraffic(l, id),
    consoleOutput: (teamID, id, maxBytes) => consoleOutput(l, teamID, id, maxBytes),
    listV1: (teamID, metadata) => listV1(l, teamID, metadata),
    listV2: (teamID, q) => listV2(l, teamID, q),
    connect: (teamID, id, timeout, memory) => connectSandbox(l, teamID, id, timeout, memory),
    resume: (teamID, id, timeout, autoPause, memory) => resumeSandbox(l, teamID, id, { timeout, autoPause, memory }),
    pause: (teamID, id, keepMemory) => pauseSandbox(l, teamID, id, keepMemory),
    setTimeout: (teamID, id, timeout) => l.lane(id, async () => l.keepAlive(l.owned(teamID, id, ["running"]), Math.max(0, timeout), true)),
    refresh: (teamID, id, duration) => l.lane(id, async () => l.keepAlive(l.owned(teamID, id, ["running"]), duration, false)),
    kill: (teamID, id) => killSandbox(l, teamID, id),
    snapshot: (teamID, id, name) => takeSnapshot(l, teamID, id, name),
    listSnapshots: (teamID, q) => listSnapshots(l, teamID, q),
    deleteSnapshot: (teamID, ref) => l.track(deleteSnapshot(l, teamID, ref)),
    fork: (teamID, id, count, timeout) => l.track(forkSandbox(l, teamID, id, count, timeout)),
    updateNetwork: (teamID, id, update) => updateNetwork(l, teamID, id, update),
    templateByAlias: (teamID, alias) => templateAliasBody(l.store, teamID, alias),
    pool: l.warm.pool,
    startBackground: (o = {}) =>
      l.startBackground([
        { everyMs: o.evictEveryMs ?? 250, pass: () => evictExpired(l) },
        { everyMs: o.reconcileEveryMs ?? DEFAULT_RECONCILE_MS, pass: () => reconcileLive(l) },
      ]),
    close: () => l.close(),
  };
}

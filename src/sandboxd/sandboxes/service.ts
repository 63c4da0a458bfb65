import type { Logger } from "../log.js";
import type { Runtime } from "../runtime/runtime.js";
import type { SandboxRow } from "../store/sandboxes.js";
import { installSecret } from "../store/seed.js";
import type { Store } from "../store/store.js";
import type { Template } from "../store/templates.js";
import { initEnvd } from "./envd-init.js";
import { httpsPortsOf } from "../proxy/target.js";
import { Conflict, Invalid, OperationFailed, sandboxNotFound } from "../errors.js";
import { createSandboxIndex, type SandboxIndex } from "./index.js";
import type { CreateInput, ListQuery, NetworkUpdate } from "./inputs.js";
import { egressPolicy, type EgressPolicy } from "../network/policy.js";
import { decodeCursor, matchesMetadata, page, sortRows } from "./list.js";
import { reconcile } from "./reconcile.js";
import { createSerializer } from "../serial.js";
import { sandboxEnv } from "./launch.js";
import { createServicePool } from "./warm-templates.js";
import { createSandbox } from "./create.js";
import type { WarmPool } from "../pool/warm-pool.js";
import { envdAccessToken } from "./tokens.js";
import { detailBody, listedBody, sandboxBody } from "./views.js";
import { checkTimeoutFor, keptAliveUntil, withNetworkUpdate } from "./row-updates.js";
import { templateAliasBody } from "./resolve.js";
import { evictExpired } from "./evict.js";
import { fits, reserved, type Budget, type Resources } from "./budget.js";

type Body = Record<string, unknown>;

/** The sandbox lifecycle: every operation of the control API on sandboxes, for a team. */
export interface SandboxService {
  index: SandboxIndex;
  /** Brings the store, the index and the runtime into agreement (start-up). */
  reconcile(): Promise<void>;
  create(teamID: string, input: CreateInput): Promise<Body>;
  get(teamID: string, id: string): Body;
  /** The tail of a running or paused sandbox's console output (envd's log lines), with when it started. */
  consoleOutput(teamID: string, id: string, maxBytes: number): Promise<{ bytes: Buffer; startedAt: string }>;
  listV1(teamID: string, metadata: [string, string][]): Body[];
  listV2(teamID: string, q: ListQuery): { items: Body[]; nextToken?: string; totalRunning?: number };
  connect(teamID: string, id: string, timeout: number): Promise<{ status: 200 | 201; body: Body }>;
  resume(teamID: string, id: string, timeout: number, autoPause?: boolean): Promise<Body>;
  pause(teamID: string, id: string): Promise<void>;
  setTimeout(teamID: string, id: string, timeout: number): Promise<void>;
  refresh(teamID: string, id: string, duration: number): Promise<void>;
  kill(teamID: string, id: string): Promise<void>;
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
  /** Starts the evictor (expired sandboxes are killed, or paused with autoPause) and the warm pool's refills. */
  startBackground(evictEveryMs?: number): void;
  /** Stops the evictor, removes the pool's sandboxes and waits for operations in flight; created sandboxes keep running. */
  close(): Promise<void>;
}

const ENVD_PORT = 49983;
/** How long a sandbox resumed by traffic runs before its timeout applies again (the SDK's connect default). */
const AUTO_RESUME_TIMEOUT_S = 300;
const QUIET_AFTER_CREATE_MS = 100;

/** Creates the service over a store and a runtime; call reconcile() before serving. */
export function createSandboxService(opts: {
  store: Store; runtime: Runtime; log: Logger; domain: string; onStarted?: (teamID: string) => void;
  /** Started sandboxes kept per warm template (0: none); the default template is always kept warm. */
  warmPoolSize?: number; defaultTemplateID?: string;
  /** What sandboxes may reserve: creates past it get 429, and the warm pool fills only below it. */
  budget: Budget;
}): SandboxService {
  const { store, runtime, log } = opts;
  const index = createSandboxIndex();
  const serial = createSerializer();
  const inflight = new Set<Promise<unknown>>();
  let evictor: NodeJS.Timeout | undefined;
  let closed = false;
  const activity = { creating: 0, lastCreated: 0 };
  // Refills wait while creates run and just after one: its caller's first requests come next.
  const foregroundBusy = () => activity.creating > 0 || Date.now() - activity.lastCreated < QUIET_AFTER_CREATE_MS;
  // A refill leaves room for one more sandbox of its size beside it, so a create never finds the
  // last of the budget taken by the pool (and a create that still does not fit sheds pooled ones).
  const admitPooled = (need: Resources, pooled: Resources) =>
    fits(reserved(store.sandboxes.all()), { memoryMB: pooled.memoryMB + 2 * need.memoryMB, diskMB: pooled.diskMB + 2 * need.diskMB }, opts.budget.host);
  const warm = createServicePool({ store, runtime, log, size: opts.warmPoolSize ?? 0, defaultTemplateID: opts.defaultTemplateID, foregroundBusy, admit: admitPooled });

  const secret = () => installSecret(store);
  const tokenOf = (row: SandboxRow) => (row.secure ? envdAccessToken(secret(), row.id) : undefined);
  const maxLengthMs = (teamID: string) => (store.teams.get(teamID)?.maxLengthHours ?? 24) * 3600_000;
  const track = <T>(p: Promise<T>): Promise<T> => {
    inflight.add(p);
    void p.finally(() => inflight.delete(p)).catch(() => undefined);
    return p;
  };

  /** Running sandboxes' outbound rules by address, kept beside the index. */
  const egressByIp = new Map<string, EgressPolicy>();
  const policyOf = (row: SandboxRow) =>
    egressPolicy({ allowOut: row.network.allowOut as string[] | undefined, denyOut: row.network.denyOut as string[] | undefined, allowInternetAccess: row.allowInternetAccess });

  const publish = (row: SandboxRow) => {
    if (row.ip) egressByIp.delete(row.ip);
    if (row.ip && row.state === "running") egressByIp.set(row.ip, policyOf(row));
    if (!row.ip || row.state === "starting") return index.delete(row.id);
    const net = row.network as { maskRequestHost?: string };
    const httpsPorts = httpsPortsOf(row.network, row.envdPort ?? ENVD_PORT);
    index.set({ sandboxID: row.id, state: row.state, ip: row.ip, envdPort: row.envdPort ?? ENVD_PORT, ...(row.autoResume ? { autoResume: true } : {}), ...(row.trafficToken ? { trafficAccessToken: row.trafficToken } : {}), ...(net.maskRequestHost ? { maskRequestHost: net.maskRequestHost } : {}), ...(httpsPorts.length > 0 ? { httpsPorts } : {}) });
  };

  const owned = (teamID: string, id: string, states: SandboxRow["state"][] = ["running", "paused"]): SandboxRow => {
    const row = store.sandboxes.get(id);
    if (!row || row.teamID !== teamID || !states.includes(row.state)) throw sandboxNotFound(id);
    return row;
  };

  const checkTimeout = (teamID: string, timeout: number) => checkTimeoutFor(maxLengthMs(teamID), timeout);
  const keepAlive = (row: SandboxRow, timeoutS: number, allowShorter: boolean) =>
    store.sandboxes.update({ ...row, endAt: keptAliveUntil(row, maxLengthMs(row.teamID), timeoutS, allowShorter) });

  /** Calls envd's /init; `envVars` undefined (a resume) leaves envd's variables as the create set them. */
  const init = async (row: SandboxRow, tpl: Template | undefined, envVars: Record<string, string> | undefined, totalMs?: number) =>
    initEnvd({
      ip: row.ip!, port: row.envdPort ?? ENVD_PORT, accessToken: tokenOf(row),
      envVars: envVars && { ...envVars, ...sandboxEnv(row.id, row.templateID) },
      defaultUser: tpl?.defaultUser ?? undefined, defaultWorkdir: tpl?.defaultWorkdir ?? undefined,
    }, totalMs);

  const create = (teamID: string, input: CreateInput) =>
    createSandbox({ store, runtime, log, serial, warm, activity, budget: opts.budget, secret, tokenOf, policyOf, publish, init, checkTimeout, onStarted: opts.onStarted, dropRoute: (id) => index.delete(id) }, teamID, input);

  const resumePaused = async (row: SandboxRow, timeout: number, autoPause?: boolean): Promise<Body> => {
    await runtime.thaw(row.id);
    const tpl = store.templates.get(row.templateID);
    await init(row, tpl, undefined, 3000).catch((err: Error) => {
      log.warn({ sandboxID: row.id, err: err.message }, "envd /init after resume failed; the sandbox runs with its earlier init");
    });
    const t = Date.now();
    const next: SandboxRow = { ...row, state: "running", startedAt: new Date(t).toISOString(), endAt: new Date(t + timeout * 1000).toISOString(), autoPause: autoPause ?? row.autoPause };
    store.sandboxes.update(next);
    publish(next);
    return sandboxBody(next, tpl, tokenOf(next));
  };

  const pauseRow = async (row: SandboxRow) => {
    await runtime.freeze(row.id);
    const next: SandboxRow = { ...row, state: "paused", endAt: new Date().toISOString() };
    store.sandboxes.update(next);
    publish(next);
  };

  const killRow = async (row: SandboxRow) => {
    index.delete(row.id);
    if (row.ip) egressByIp.delete(row.ip);
    await runtime.remove(row.id);
    store.sandboxes.delete(row.id);
  };

  const evict = () => evictExpired({ store, serial, log, pause: pauseRow, kill: killRow });

  return {
    index,

    async reconcile() {
      await reconcile({ store, runtime, log, publish });
      // The resolver's and egress proxy's ports are new on every start: the live sandboxes' tables follow.
      for (const row of store.sandboxes.all()) {
        if (row.state !== "running" && row.state !== "paused") continue;
        await runtime.setEgress(row.id, policyOf(row)).catch((err: Error) => log.error({ sandboxID: row.id, err: err.message }, "re-applying a sandbox's network rules failed"));
      }
    },

    egressOf: (ip) => egressByIp.get(ip),

    create: (teamID, input) => track(create(teamID, input)),

    get(teamID, id) {
      const row = owned(teamID, id);
      return detailBody(row, store.templates.get(row.templateID), tokenOf(row));
    },

    resumeOnTraffic: (id) =>
      track(serial(id, async () => {
        const row = store.sandboxes.get(id);
        if (!row || !row.autoResume) return false;
        if (row.state === "paused") {
          await resumePaused(row, AUTO_RESUME_TIMEOUT_S);
          log.info({ sandboxID: id }, "sandbox resumed by traffic");
        }
        return store.sandboxes.get(id)?.state === "running";
      })),

    async consoleOutput(teamID, id, maxBytes) {
      const row = owned(teamID, id);
      return { bytes: (await runtime.consoleTail(row.id, maxBytes)) ?? Buffer.alloc(0), startedAt: row.startedAt };
    },

    listV1(teamID, metadata) {
      const rows = store.sandboxes.listByTeam(teamID).filter((r) => r.state === "running" && matchesMetadata(r, metadata));
      return sortRows(rows, "desc").map((r) => listedBody(r, store.templates.get(r.templateID)));
    },

    listV2(teamID, q) {
      const cursor = q.nextToken ? decodeCursor(q.nextToken, q.order) : undefined;
      let rows = store.sandboxes.listByTeam(teamID).filter((r) => r.state !== "starting" && q.states.includes(r.state) && matchesMetadata(r, q.metadata));
      if (q.startedAfter !== undefined) rows = rows.filter((r) => Date.parse(r.startedAt) >= q.startedAfter!);
      if (q.template !== undefined) {
        const tpl = store.templates.get(q.template) ?? store.templates.byAlias(q.template);
        rows = tpl && tpl.teamID === teamID ? rows.filter((r) => r.templateID === tpl.id) : [];
      }
      const totalRunning = q.states.includes("running") ? rows.filter((r) => r.state === "running").length : undefined;
      const { items, next } = page(sortRows(rows, q.order), q.order, q.limit, cursor);
      return { items: items.map((r) => listedBody(r, store.templates.get(r.templateID))), nextToken: next, totalRunning };
    },

    connect: (teamID, id, timeout) =>
      track(serial(id, async () => {
        const row = owned(teamID, id);
        if (timeout * 1000 > maxLengthMs(teamID)) throw new Invalid(`Timeout cannot be greater than ${maxLengthMs(teamID) / 3600_000} hours`);
        if (row.state === "paused") return { status: 201 as const, body: await resumePaused(row, Math.max(timeout, 1)) };
        keepAlive(row, timeout, false);
        const cur = store.sandboxes.get(id)!;
        return { status: 200 as const, body: sandboxBody(cur, store.templates.get(cur.templateID), tokenOf(cur)) };
      })),

    resume: (teamID, id, timeout, autoPause) =>
      track(serial(id, async () => {
        const row = owned(teamID, id);
        checkTimeout(teamID, timeout);
        if (row.state === "running") throw new Conflict(`Sandbox ${id} is already running`);
        return resumePaused(row, timeout, autoPause);
      })),

    pause: (teamID, id) =>
      track(serial(id, async () => {
        const row = owned(teamID, id);
        if (row.state === "paused") throw new Conflict(`Error pausing sandbox - sandbox '${id}' is already paused`);
        await pauseRow(row);
      })),

    setTimeout: (teamID, id, timeout) =>
      track(serial(id, async () => keepAlive(owned(teamID, id, ["running"]), Math.max(0, timeout), true))),

    refresh: (teamID, id, duration) =>
      track(serial(id, async () => keepAlive(owned(teamID, id, ["running"]), duration, false))),

    kill: (teamID, id) => track(serial(id, async () => killRow(owned(teamID, id)))),

    updateNetwork: (teamID, id, update) =>
      track(serial(id, async () => {
        const row = owned(teamID, id);
        if (row.state !== "running") throw new Conflict(`Sandbox "${id}" is not running (it is ${row.state})`);
        const next = withNetworkUpdate(row, update);
        try {
          await runtime.setEgress(id, policyOf(next));
        } catch (err) {
          log.error({ sandboxID: id, err: (err as Error).message }, "updating a sandbox's network rules failed");
          throw new OperationFailed(`Failed to update the sandbox's network rules: ${(err as Error).message}`);
        }
        store.sandboxes.update(next);
        publish(next);
        log.info({ sandboxID: id, allowOut: update.allowOut?.length ?? 0, denyOut: update.denyOut?.length ?? 0 }, "sandbox network rules replaced");
      })),

    templateByAlias: (teamID, alias) => templateAliasBody(store, teamID, alias),

    pool: warm.pool,

    startBackground(everyMs = 250) {
      if (evictor || closed) return;
      warm.pool.start();
      let busy = false;
      evictor = setInterval(() => {
        if (busy) return;
        busy = true;
        void track(evict()).finally(() => (busy = false));
      }, everyMs);
      evictor.unref();
    },

    async close() {
      closed = true;
      if (evictor) clearInterval(evictor);
      await Promise.allSettled([...inflight, warm.pool.close()]);
    },
  };
}

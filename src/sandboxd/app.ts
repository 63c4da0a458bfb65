import { loadSpawnAddon } from "./host/native-spawn.js";
import { existsSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { defaultRouteInterface } from "./network/egress.js";
import { startEgressServices, type EgressServices } from "./network/services.js";
import { createSlotNetwork } from "./network/slot-network.js";
import type { Config } from "./config.js";
import { resolveEnvdDir, userLines } from "./cli.js";
import { ensureBaseRootfs } from "./images/base.js";
import { describeProgress } from "./images/progress.js";
import type { Logger } from "./log.js";
import { createProxy } from "./proxy/proxy.js";
import type { RouteIndex } from "./proxy/target.js";
import { createApiHandler } from "./api/handler.js";
import { createDashboard, resolveDashboardDir } from "./dashboard/serve.js";
import { createMetrics } from "./metrics/service.js";
import { createRuncRuntime } from "./runtime/runc.js";
import type { Runtime } from "./runtime/runtime.js";
import { StoragePool } from "./storage/pool.js";
import { templateHolders } from "./sandboxes/holders.js";
import { snapshotNameClash } from "./sandboxes/snapshots.js";
import { createSandboxService, type SandboxService } from "./sandboxes/service.js";
import { createTemplateService, type TemplateService } from "./templates/service.js";
import { createDispatcher, type ApiHandler, type Readiness } from "./server/dispatch.js";
import { createListener } from "./server/listener.js";
import { DEFAULT_TEAM_ID, registerBaseTemplate, seed } from "./store/seed.js";
import { openStore, type Store } from "./store/store.js";
import { ensureTls } from "./tls/certs.js";
import { prepareDataDir, sweepStrangers, sweepTemporaries } from "./data-dir.js";
import { diskFreeAboveFloorMB, memoryAvailableAboveFloorMB } from "./host/floors.js";
import { checkHostLimits } from "./host/limits.js";
import type { Budget } from "./sandboxes/budget.js";
import { SANDBOX_ID } from "./runtime/spec.js";

/** A started sandboxd: its port, what to print for the user, and a stop that leaves sandboxes running. */
export interface App {
  port: number;
  userLines: string;
  close(): Promise<void>;
}

/** Requests in flight get this long to finish at shutdown before their connections are cut. */
const SHUTDOWN_GRACE_MS = 3000;

/**
 * The E2B envd version whose API our envd implements (the reference's `pkg/version.go`); the SDK
 * gates features on the version a template reports, so the base template reports this one.
 */
const ENVD_COMPATIBLE_VERSION = "0.6.13";

/** Writes a secret file atomically with mode 0600 (a crash leaves the old file or none). */
function writeSecret(file: string, text: string): void {
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, file);
}

/**
 * The default team's API key when this start made it (to be shown this once), or undefined when
 * `<dataDir>/api-key` (0600) already holds it. A first start seeds the store and writes the file;
 * the store keeps only a hash, so a lost file is replaced by a new key.
 */
function newApiKey(store: Store, file: string, log: Logger): string | undefined {
  const seeded = seed(store);
  if (seeded.seeded) {
    writeSecret(file, seeded.apiKey + "\n");
    log.info({ file }, "made the default team and its API key");
    return seeded.apiKey;
  }
  if (existsSync(file)) return undefined;
  const fresh = seedKey();
  store.apiKeys.add(fresh, DEFAULT_TEAM_ID);
  writeSecret(file, fresh + "\n");
  log.warn({ file }, "the API key file was missing: issued a new key for the default team (earlier keys still work)");
  return fresh;
}

/** A new key in E2B's format (`e2b_` + 40 hex). */
function seedKey(): string {
  const b = new Uint8Array(20);
  crypto.getRandomValues(b);
  return "e2b_" + Buffer.from(b).toString("hex");
}

/** Tools start through the spawn of envd's addon when it loads here, else from worker threads; logs which. */
function startToolsFrom(envdDir: string, log: Logger): void {
  const file = join(envdDir, "inotify.node");
  const why = loadSpawnAddon(file);
  if (why) log.info({ reason: why }, "system tools start from worker threads (forking sandboxd)");
  else log.debug({ addon: file }, "system tools start without forking sandboxd");
}

/**
 * Composition root: data dir → store (seeded once) → TLS → listener (answering /health 503
 * until ready) → runtime → base template → the sandbox service behind the API and the proxy.
 * The listener comes up first so that a first start, which builds the base template for
 * minutes, is visibly alive.
 */
export async function startApp(config: Config, version: string, log: Logger): Promise<App> {
  prepareDataDir(config.dataDir);
  sweepTemporaries(config.dataDir, log);
  const envdDir = resolveEnvdDir(config.envdDir, version);
  startToolsFrom(envdDir, log);
  const store = openStore(join(config.dataDir, "sandboxd.db"));
  const keyFile = join(config.dataDir, "api-key");
  const key = newApiKey(store, keyFile, log);
  const tls = await ensureTls(config.dataDir, config.domain, log);
  const budget: Budget = {
    host: { memoryMB: config.memoryBudgetMB, diskMB: config.diskBudgetMB },
    // without a memory budget, limits are not reserved and admission keeps the host's floor available
    memoryFreeMB: config.memoryBudgetMB === undefined ? () => memoryAvailableAboveFloorMB() : undefined,
    // without a disk budget, disks are thin (sparse) and admission keeps the floor free instead
    diskFreeMB: config.diskBudgetMB === undefined ? () => diskFreeAboveFloorMB(config.dataDir) : undefined,
    team: { memoryMB: config.teamMemoryMB, diskMB: config.teamDiskMB },
    maxSandboxMemoryMB: config.maxSandboxMemoryMB,
  };
  log.info({ memoryMB: budget.host.memoryMB ?? "available", diskMB: budget.host.diskMB ?? "thin", teamMemoryMB: budget.team.memoryMB ?? "host", teamDiskMB: budget.team.diskMB ?? "host", maxSandboxMemoryMB: budget.maxSandboxMemoryMB }, "sandbox budget");
  checkHostLimits(config.memoryBudgetMB, log);
  let index: RouteIndex = { lookup: () => undefined };
  let api: ApiHandler | undefined;
  let state: ReturnType<Readiness> = { ready: false, reason: "starting" };
  let wake: ((sandboxID: string) => Promise<boolean>) | undefined;
  const proxy = createProxy({ index: { lookup: (id) => index.lookup(id) }, log, wake: (id) => wake?.(id) ?? Promise.resolve(false), exists: (id) => store.sandboxes.get(id) !== undefined });
  const dashboard = createDashboard({ dir: resolveDashboardDir(), api: () => api });
  const dispatcher = createDispatcher({ domain: config.domain, api: () => api, proxy, readiness: () => state, log, dashboard });
  const listener = createListener({ key: tls.key, cert: tls.cert, dispatcher, log });
  let service: SandboxService | undefined;
  // The host network is claimed before anything listens: another instance on an overlapping range is refused.
  const egressInterface = config.egressInterface === "auto" ? await defaultRouteInterface() : config.egressInterface;
  log.info({ egressInterface: egressInterface ?? "none" }, "sandbox egress");
  const egress: EgressServices | undefined = await startEgressServices({ egressInterface, dnsUpstream: config.dnsUpstream, policyOf: (ip) => service?.egressOf(ip), log });
  // the runtime is given the sandboxes' network, as a container runtime is given its CNI plugin
  const network = createSlotNetwork({ dataDir: config.dataDir, networkCidr: config.networkCidr, egressInterface, served: egress?.served, spares: config.spareSlots, log });
  let storage: StoragePool | undefined;
  let runtime: Runtime;
  try {
    // sandbox disks and snapshots live in the storage pool: reflinks, so a disk, a snapshot or a fork costs metadata
    storage = await StoragePool.open({ dataDir: config.dataDir, backing: config.storageBacking, sizeMB: config.storageSizeMB, log });
    runtime = createRuncRuntime({ dataDir: config.dataDir, envdDir, network, storage, log });
    await runtime.start?.();
  } catch (err) {
    await storage?.close();
    egress?.close();
    store.close();
    throw err;
  }
  const port = await listener.listen(config.listenHost, config.listenPort);
  log.info({ host: config.listenHost, port, domain: config.domain, envdDir, version }, "listening");

  let templates: TemplateService | undefined;
  let closing = false;
  const metrics = createMetrics({ store, log, retentionS: config.metricsRetentionDays * 86400 });
  const boot = async () => {
    const building = "building the base template (the first start on a machine takes minutes)";
    state = { ready: false, reason: building };
    const rootfs = await ensureBaseRootfs({ cacheDir: config.cacheDir, log, onProgress: (p) => (state = { ready: false, reason: `${building}: ${describeProgress(p)}` }) });
    if (closing) return;
    const templateID = registerBaseTemplate(store, { rootfs, envdVersion: ENVD_COMPATIBLE_VERSION });
    log.info({ templateID, rootfs }, "base template ready");
    state = { ready: false, reason: "finding the sandboxes of the last run" };
    service = createSandboxService({
      store, runtime, log, onStarted: (teamID) => metrics.sampler.started(teamID), warmPoolSize: config.warmPool, defaultTemplateID: templateID, budget,
      maxSnapshots: config.teamMaxSnapshots,
    });
    metrics.warmPool = () => service!.pool.stats();
    const rows = service.rows;
    metrics.rows = () => rows.all();
    await service.reconcile();
    sweepStrangers(config.dataDir, (name) => SANDBOX_ID.test(name), log);
    templates = createTemplateService({
      store, log, runtime, dataDir: config.dataDir, baseRootfs: rootfs, envdVersion: ENVD_COMPATIBLE_VERSION, registry: config.registry,
      // snapshots of a template's sandboxes start on its files as much as its sandboxes run on them
      holders: (id) => templateHolders(store, id),
      nameClash: (teamID, alias) => snapshotNameClash(store, teamID, alias),
    });
    await templates.recover();
    if (closing) return;
    index = service.index;
    const live = service;
    wake = (id) => live.resumeOnTraffic(id);
    api = createApiHandler({ store, sandboxes: service, templates, log, metrics });
    service.startBackground({ reconcileEveryMs: config.reconcileIntervalMs });
    metrics.start();
    state = { ready: true };
    log.info("ready: sandboxes can be made");
  };
  const booted = boot().catch((err: Error) => {
    state = { ready: false, reason: err.message };
    log.error({ err: err.message }, "sandboxd cannot make sandboxes");
  });

  return {
    port,
    userLines: userLines({ domain: config.domain, port, apiKey: key, keyFile, caFile: tls.caFile, teamID: DEFAULT_TEAM_ID }),
    async close() {
      closing = true;
      await listener.close(SHUTDOWN_GRACE_MS);
      proxy.close();
      // A boot still building the base template is left to die with the process; one that
      // reached the service is waited for, so the store is not closed under it.
      if (service) await booted;
      await templates?.close();
      await service?.close();
      metrics.stop();
      egress?.close();
      // a sandboxd stopped with no sandbox leaves no host firewall behind (one with sandboxes keeps it for them)
      await runtime.close?.().catch((err: Error) => log.error({ err: err.message }, "removing the host firewall failed"));
      // a pool whose disks are still in use (sandboxes outlive the process) stays mounted for the next start
      await storage.close().catch((err: Error) => log.error({ err: err.message }, "closing the storage pool failed"));
      store.close();
    },
  };
}

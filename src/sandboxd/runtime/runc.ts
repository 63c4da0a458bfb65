import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Logger } from "../log.js";
import { createSerializer } from "../serial.js";
import { removeCgroup, setCpuShares } from "../host/cgroups.js";
import { assertIdRangeFree, MAPPED_ROOT } from "../host/idmap.js";
import { instanceKey } from "../host/instance.js";
import { protectFromOom } from "../host/oom.js";
import { overlayOptions, rootfsLowers, rootfsProbe } from "../host/overlay.js";
import { assertReachableBySandboxes } from "../host/reach.js";
import type { EgressPolicy, PreparedSlot, SandboxNetwork } from "../host/sandbox-network.js";
import { identityMounts } from "./identity.js";
import { cpuShares, ociConfig } from "./oci-config.js";
import { ENVD_PORT } from "../envd-client/port.js";
import { BACKGROUND_NICE, checkSpec, SANDBOX_ID } from "./spec.js";
import { consolePath, consoleText, readConsoleTail } from "./console.js";
import { RuncCli } from "./runc-cli.js";
import { InitWatch } from "./liveness.js";
import { teardownSandbox } from "./runc-teardown.js";
import { diskSource, SandboxDisks } from "./runc-disk.js";
import type { StoragePool } from "../storage/pool.js";
import { RuncRuns } from "./runc-once.js";
import type { ObservedSandbox, RunOnceResult, RunOnceSpec, Runtime, SandboxAddress, SandboxSpec } from "./runtime.js";
import { RecordStore } from "./state.js";
import { waitForEnvd } from "./wait.js";

/** Options of the runc backend. */
export interface RuncOptions {
  /** sandboxd's data directory; the runtime keeps its state under runtime/, runc/ and sandboxes/ there. */
  dataDir: string;
  /** The unpacked envd release artifact (holds the `envd` executable and its addons). */
  envdDir: string;
  /** The sandboxes' network: their addresses, wiring and egress rules (the runtime only asks for them). */
  network: SandboxNetwork;
  /** The storage pool sandbox disks and snapshots live in (opened and closed by the caller). */
  storage: StoragePool;
  log: Logger;
  /** Most processes (and threads) one sandbox may have at once (default 1024). */
  pidsLimit?: number;
  /** The static tini bind-mounted as each sandbox's PID 1 (default /usr/bin/tini-static). */
  tiniPath?: string;
  /** How long create() waits for envd to accept connections (default 30 s). */
  startTimeoutMs?: number;
}

/** The runc backend of the Runtime contract (see SANDBOXD.md and the runtime's README text). */
export function createRuncRuntime(opts: RuncOptions): Runtime {
  return new RuncRuntime(opts);
}

class RuncRuntime implements Runtime {
  private readonly dataDir: string;
  private readonly cgroupParent: string;
  private readonly sandboxesDir: string;
  private readonly runc: RuncCli;
  private readonly inits: InitWatch;
  private readonly records: RecordStore;
  private readonly network: SandboxNetwork;
  private readonly diskPool: SandboxDisks;
  private readonly tiniPath: string;
  private readonly runs: RuncRuns;
  /** Operations on one sandbox run one after another. */
  private readonly serial = createSerializer();
  private settled?: Promise<void>;

  constructor(private readonly opts: RuncOptions) {
    assertIdRangeFree();
    protectFromOom(opts.log);
    this.dataDir = resolve(opts.dataDir);
    this.cgroupParent = `sandboxd-${instanceKey(this.dataDir)}`;
    this.sandboxesDir = join(this.dataDir, "sandboxes");
    // The sandboxes' init runs as the mapped root, which must be able to reach its bundle's rootfs.
    mkdirSync(this.sandboxesDir, { recursive: true, mode: 0o711 });
    mkdirSync(join(this.dataDir, "runc"), { recursive: true, mode: 0o700 });
    this.runc = new RuncCli(join(this.dataDir, "runc"));
    this.inits = new InitWatch(join(this.dataDir, "runc"));
    this.records = new RecordStore(join(this.dataDir, "runtime", "sandboxes"));
    this.network = opts.network;
    this.diskPool = new SandboxDisks(opts.storage, opts.log);
    this.tiniPath = opts.tiniPath ?? "/usr/bin/tini-static";
    this.runs = new RuncRuns(this.dataDir, this.tiniPath);
    assertReachableBySandboxes(join(this.sandboxesDir, "x"), "the data dir");
    assertReachableBySandboxes(join(resolve(opts.envdDir), "envd"), "the envd directory");
    assertReachableBySandboxes(this.tiniPath, "tini");
  }

  private dirOf(id: string): string {
    return join(this.sandboxesDir, id);
  }

  create(spec: SandboxSpec, signal?: AbortSignal): Promise<SandboxAddress> {
    try {
      checkSpec(spec);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    return this.serial(spec.sandboxID, async () => {
      const id = spec.sandboxID;
      if (this.records.get(id) || existsSync(this.dirOf(id))) throw new Error(`sandbox ${id} already exists`);
      const t0 = Date.now();
      try {
        const addr = await this.make(spec, signal);
        this.opts.log.info({ sandboxID: id, ip: addr.ip, ms: Date.now() - t0 }, "sandbox started");
        return addr;
      } catch (err) {
        await this.teardown(id, !!spec.keptDisk).catch((e: unknown) => this.opts.log.error({ sandboxID: id, err: e }, "cleanup after a failed create failed"));
        throw err;
      }
    });
  }

  /** The steps of create, in an order that leaves a record of every resource before it is made. */
  private async make(spec: SandboxSpec, signal?: AbortSignal): Promise<SandboxAddress> {
    const t0 = Date.now();
    await this.start();
    // a slot wired ahead takes the network off this path; a sandbox made ahead of need wires its own
    const prepared = spec.background ? undefined : await this.network.takePrepared?.(spec.sandboxID, spec.egress);
    try {
      return await this.boot(spec, t0, prepared, signal);
    } finally {
      prepared?.ended();
    }
  }

  /** The create after the network slot is chosen: records, disk, config, runc, network, envd. */
  private async boot(spec: SandboxSpec, t0: number, prepared: PreparedSlot | undefined, signal?: AbortSignal): Promise<SandboxAddress> {
    const id = spec.sandboxID;
    const dir = this.dirOf(id);
    const lease = prepared?.lease ?? this.network.claim(id);
    this.records.put({ sandboxID: id, templateID: spec.templateID, buildID: spec.buildID, ...lease, createdAt: new Date().toISOString() });
    mkdirSync(dir, { mode: 0o711 });
    const disk = join(dir, "disk");
    // a sandbox made ahead of need runs its host-side tools niced (runc itself is not: the
    // container's processes would inherit it; their CPU share is set by the cgroup instead)
    const nice = spec.background ? BACKGROUND_NICE : undefined;
    await this.diskPool.attach(id, diskSource(spec), disk, nice);
    const upper = join(disk, "upper");
    const rootfs = join(dir, "rootfs");
    // a disk copied from a snapshot or kept by a stop has its upper and work directories already
    for (const d of [upper, join(disk, "work"), rootfs]) if (!existsSync(d)) mkdirSync(d, { mode: 0o755 });
    if (!spec.fromSnapshot && !spec.keptDisk) chownSync(upper, MAPPED_ROOT, MAPPED_ROOT);
    // on the sandbox's own disk (out of its sight): a sandbox that grows its /etc/hosts fills its disk only
    const identity = identityMounts(join(disk, "identity"), { sandboxID: id, templateID: spec.templateID, buildID: spec.buildID, ip: lease.ip, nameserver: lease.hostIp });
    const hasUser = rootfsProbe(spec.rootfs, "home/user") === "dir";
    const config = ociConfig({
      sandboxID: id, templateID: spec.templateID, rootfsDir: rootfs, envdDir: resolve(this.opts.envdDir), tiniPath: this.tiniPath,
      cgroupsPath: `/${this.cgroupParent}/${id}`, cpuCount: spec.cpuCount, background: spec.background, memoryMB: spec.memoryMB,
      pidsLimit: this.opts.pidsLimit ?? 1024, defaultUser: hasUser ? "user" : "root", defaultWorkdir: hasUser ? "/home/user" : undefined,
      extraMounts: identity, joinNamespaces: prepared && { user: prepared.userns, network: prepared.netns },
    });
    writeFileSync(join(dir, "config.json"), JSON.stringify(config, null, 1));
    signal?.throwIfAborted();
    const tCreate = Date.now();
    if (prepared && !prepared.check()) throw new Error("the network slot wired ahead lost its namespaces");
    try {
      // the overlay is mounted where only runc and the container see it (nodev there too)
      const options = overlayOptions({ lower: rootfsLowers(spec.rootfs), upper, work: join(disk, "work") }, ["nodev"]);
      await this.runc.run(id, dir, join(dir, "pid"), consolePath(dir), { options, target: rootfs }, nice);
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${consoleText(dir)}`);
    }
    const tRunc = Date.now();
    const pid = Number(readFileSync(join(dir, "pid"), "utf8").trim());
    // A slot wired ahead had its firewall in before the container started. Otherwise envd (our own
    // binary, binding 0.0.0.0) starts while the network is wired: nothing the sandbox's user
    // controls runs before create() resolves, by which time the firewall is in.
    if (!prepared) await this.network.attach(lease, pid, { policy: spec.egress, nice });
    else prepared.letGo();
    const tNet = Date.now();
    signal?.throwIfAborted();
    const listenMs = await waitForEnvd({
      pid, host: lease.ip, port: ENVD_PORT, ms: this.opts.startTimeoutMs ?? 30_000, signal,
      alive: async () => (await this.runc.state(id))?.status === "running",
      why: () => `envd's output:\n${consoleText(dir)}`,
    });
    this.opts.log.debug({ sandboxID: id, prepareMs: tCreate - t0, runcRunMs: tRunc - tCreate, networkMs: tNet - tRunc, envdMs: Date.now() - tNet, listenMs, wiredAhead: !!prepared }, "create phases");
    return { sandboxID: id, ip: lease.ip, envdPort: ENVD_PORT };
  }

  /** Claims the host network through the network the runtime was given (refused when another instance's range overlaps). */
  start(): Promise<void> {
    return this.network.start(() => this.records.ids());
  }

  /** Releases the host network when no sandbox is left to need it. */
  async close(): Promise<void> {
    await this.network.close(this.records.ids().length);
  }

  freeze(sandboxID: string): Promise<void> {
    return this.serial(sandboxID, async () => {
      const st = await this.runc.state(sandboxID);
      if (!st) throw new Error(`sandbox ${sandboxID} is not known to the runtime`);
      if (st.status !== "paused") await this.runc.verb("pause", sandboxID);
    });
  }

  thaw(sandboxID: string): Promise<void> {
    return this.serial(sandboxID, async () => {
      const st = await this.runc.state(sandboxID);
      if (!st) throw new Error(`sandbox ${sandboxID} is not known to the runtime`);
      if (st.status === "paused") await this.runc.verb("resume", sandboxID);
    });
  }

  foreground(sandboxID: string, cpuCount: number): Promise<void> {
    return this.serial(sandboxID, async () => setCpuShares(`/${this.cgroupParent}/${sandboxID}`, cpuShares(cpuCount)));
  }

  setEgress(sandboxID: string, policy: EgressPolicy): Promise<void> {
    return this.serial(sandboxID, async () => {
      await this.start();
      const rec = this.records.get(sandboxID);
      const st = await this.runc.state(sandboxID);
      if (!rec || !st || !(st.pid > 0)) throw new Error(`sandbox ${sandboxID} is not running in the runtime`);
      await this.network.setPolicy(rec, st.pid, policy);
    });
  }

  remove(sandboxID: string): Promise<void> {
    if (!SANDBOX_ID.test(sandboxID)) return Promise.resolve();
    return this.serial(sandboxID, () => this.teardown(sandboxID, false));
  }

  stop(sandboxID: string, opts: { keepDisk: boolean }): Promise<void> {
    if (!SANDBOX_ID.test(sandboxID)) return Promise.resolve();
    return this.serial(sandboxID, () => this.teardown(sandboxID, opts.keepDisk));
  }

  snapshot(sandboxID: string, snapshotID: string, opts?: { copies?: number }): Promise<{ sizeBytes: number }> {
    return this.serial(sandboxID, async () => {
      if (!SANDBOX_ID.test(sandboxID) || !this.diskPool.ids().includes(sandboxID)) throw new Error(`sandbox ${sandboxID} has no disk in the runtime`);
      await this.diskPool.snapshot(sandboxID, join(this.dirOf(sandboxID), "disk"), snapshotID, `/${this.cgroupParent}/${sandboxID}`, { replay: (opts?.copies ?? Infinity) > 1 });
      return { sizeBytes: statSync(this.diskPool.pool.snapshotPath(snapshotID)).blocks * 512 };
    });
  }

  removeSnapshot(snapshotID: string): Promise<void> {
    return this.diskPool.pool.removeSnapshot(snapshotID);
  }

  async snapshots(): Promise<string[]> {
    return this.diskPool.pool.listSnapshots();
  }

  async disks(): Promise<string[]> {
    return this.diskPool.ids();
  }

  /** Removes whatever exists of a sandbox (half-made ones too), then its record; `keepDisk` leaves its disk image in the pool. */
  private async teardown(id: string, keepDisk: boolean): Promise<void> {
    const parts = { runc: this.runc, network: this.network, disks: this.diskPool, dir: this.dirOf(id), cgroup: `/${this.cgroupParent}/${id}` };
    await teardownSandbox(parts, id, keepDisk);
    this.records.delete(id);
    this.inits.forget(id);
  }

  async consoleTail(sandboxID: string, maxBytes: number): Promise<Buffer | undefined> {
    if (!SANDBOX_ID.test(sandboxID) || !this.records.get(sandboxID)) return undefined;
    return readConsoleTail(this.dirOf(sandboxID), maxBytes);
  }

  async list(): Promise<ObservedSandbox[]> {
    // the first look of a new process waits for runc commands a killed predecessor left running,
    // then thaws any disk a crash left fsfrozen mid-snapshot
    this.settled ??= this.runc.settle().then(() => this.diskPool.thawAll(this.sandboxesDir));
    await this.settled;
    const containers = new Map((await this.runc.list()).map((c) => [c.id, c]));
    const out: ObservedSandbox[] = [];
    for (const id of this.records.ids()) {
      const rec = this.records.get(id);
      if (!rec) continue;
      const st = containers.get(id)?.status;
      out.push({ sandboxID: id, ip: rec.ip, envdPort: ENVD_PORT, status: st === "running" ? "running" : st === "paused" ? "paused" : "stopped" });
    }
    return out;
  }

  async alive(): Promise<ReadonlySet<string>> {
    this.settled ??= this.runc.settle().then(() => this.diskPool.thawAll(this.sandboxesDir));
    await this.settled;
    return new Set(this.records.ids().filter((id) => this.inits.alive(id)));
  }

  async sweep(keep: ReadonlySet<string>): Promise<void> {
    const ids = new Set<string>([
      ...this.records.ids(),
      ...readdirSync(this.sandboxesDir),
      ...(await this.runc.list()).map((c) => c.id),
      ...this.network.claimed(),
      ...this.diskPool.ids(),
    ]);
    for (const id of ids) {
      if (keep.has(id) || !SANDBOX_ID.test(id) || this.serial.busy(id)) continue;
      this.opts.log.info({ sandboxID: id }, "sweeping a sandbox that is not kept");
      await this.remove(id).catch((err: unknown) => this.opts.log.error({ sandboxID: id, err }, "sweep could not remove a sandbox"));
    }
    // the instance's parent cgroup goes once it is empty (runc makes it again when needed)
    removeCgroup(`/${this.cgroupParent}`);
  }

  runOnce(spec: RunOnceSpec, signal?: AbortSignal): Promise<RunOnceResult> {
    return this.runs.run(spec, signal);
  }

  sweepRuns(): Promise<void> {
    return this.runs.sweep();
  }
}


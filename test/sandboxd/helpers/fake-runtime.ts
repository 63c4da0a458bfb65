/**
 * An in-memory Runtime and envd client for unit tests of the sandbox lifecycle and the warm pool:
 * no root, no runc, no network. Hooks make a create or a snapshot fail or hang, or a sandbox die; every call is
 * recorded, and `when` resolves once a call has happened.
 */
import { EventEmitter } from "node:events";
import type { EnvdAddress, EnvdClient, EnvdConnector, InitSettings } from "../../../src/sandboxd/envd-client/client.js";
import { ENVD_PORT } from "../../../src/sandboxd/envd-client/port.js";
import type { EgressPolicy } from "../../../src/sandboxd/network/policy.js";
import type { ObservedSandbox, RunOnceResult, Runtime, SandboxAddress, SandboxSpec } from "../../../src/sandboxd/runtime/runtime.js";

/** A runtime verb. */
export type RuntimeOp = "create" | "freeze" | "thaw" | "foreground" | "setEgress" | "remove" | "stop" | "snapshot" | "sweep";

/** One call the runtime got. */
export interface RuntimeCall {
  op: RuntimeOp;
  sandboxID: string;
}

/** A sandbox the fake runtime holds. */
export interface FakeSandbox {
  spec: SandboxSpec;
  addr: SandboxAddress;
  status: ObservedSandbox["status"];
  egress?: EgressPolicy;
  /** Given its own CPU share (a pooled sandbox claimed, or a normal create). */
  foreground: boolean;
}

/** The fake Runtime. */
export class FakeRuntime implements Runtime {
  readonly sandboxes = new Map<string, FakeSandbox>();
  readonly calls: RuntimeCall[] = [];
  /** Disks kept by a stop with keepDisk (a running sandbox's disk is implied by the sandbox). */
  readonly keptDisks = new Set<string>();
  /** Snapshots taken, by ID: the sandbox each was taken of. */
  readonly snaps = new Map<string, string>();
  /** Runs before a create makes anything: throw to fail it, never resolve to hang it (the signal still aborts). */
  onCreate?: (spec: SandboxSpec) => Promise<void> | void;
  /** Runs once a snapshot's image exists and before the copy completes: never resolve to hang it half-made. */
  onSnapshot?: (sandboxID: string, snapshotID: string) => Promise<void> | void;
  private readonly events = new EventEmitter();
  private next = 2;

  /** Resolves once `op` was called (on `sandboxID`, when given), at once when it already was. */
  when(op: RuntimeOp, sandboxID?: string): Promise<void> {
    const match = (c: RuntimeCall) => c.op === op && (sandboxID === undefined || c.sandboxID === sandboxID);
    if (this.calls.some(match)) return Promise.resolve();
    return new Promise((resolve) => {
      const on = (c: RuntimeCall) => {
        if (!match(c)) return;
        this.events.off("call", on);
        resolve();
      };
      this.events.on("call", on);
    });
  }

  /** How many times `op` was called. */
  count(op: RuntimeOp): number {
    return this.calls.filter((c) => c.op === op).length;
  }

  /** The sandbox's processes exit (killed, OOM): it is still listed, as stopped. */
  die(sandboxID: string): void {
    const sb = this.sandboxes.get(sandboxID);
    if (sb) sb.status = "stopped";
  }

  async create(spec: SandboxSpec, signal?: AbortSignal): Promise<SandboxAddress> {
    this.record("create", spec.sandboxID);
    if (this.onCreate) {
      const hook = Promise.resolve(this.onCreate(spec));
      await (signal ? Promise.race([hook, aborted(signal)]) : hook);
    }
    signal?.throwIfAborted();
    const addr = { sandboxID: spec.sandboxID, ip: `10.0.${Math.floor(this.next / 250)}.${this.next++ % 250}`, envdPort: ENVD_PORT };
    if (spec.fromSnapshot && !this.snaps.has(spec.fromSnapshot)) throw new Error(`no snapshot ${spec.fromSnapshot}`);
    if (spec.keptDisk && !this.keptDisks.delete(spec.sandboxID)) throw new Error(`no kept disk of ${spec.sandboxID}`);
    this.sandboxes.set(spec.sandboxID, { spec, addr, status: "running", egress: spec.egress, foreground: !spec.background });
    return addr;
  }

  async freeze(id: string): Promise<void> {
    this.record("freeze", id);
    this.get(id).status = "paused";
  }

  async thaw(id: string): Promise<void> {
    this.record("thaw", id);
    const sb = this.get(id);
    if (sb.status === "paused") sb.status = "running";
  }

  async foreground(id: string): Promise<void> {
    this.record("foreground", id);
    this.get(id).foreground = true;
  }

  async setEgress(id: string, policy: EgressPolicy): Promise<void> {
    this.record("setEgress", id);
    this.get(id).egress = policy;
  }

  async remove(id: string): Promise<void> {
    this.record("remove", id);
    this.sandboxes.delete(id);
    this.keptDisks.delete(id);
  }

  async stop(id: string, opts: { keepDisk: boolean }): Promise<void> {
    this.record("stop", id);
    if (this.sandboxes.delete(id) && opts.keepDisk) this.keptDisks.add(id);
    if (!opts.keepDisk) this.keptDisks.delete(id);
  }

  async snapshot(id: string, snapshotID: string): Promise<{ sizeBytes: number }> {
    this.record("snapshot", id);
    if (!this.sandboxes.has(id) && !this.keptDisks.has(id)) throw new Error(`no sandbox ${id}`);
    this.snaps.set(snapshotID, id);
    if (this.onSnapshot) await this.onSnapshot(id, snapshotID);
    return { sizeBytes: 4096 };
  }

  async removeSnapshot(snapshotID: string): Promise<void> {
    this.snaps.delete(snapshotID);
  }

  async snapshots(): Promise<string[]> {
    return [...this.snaps.keys()];
  }

  async disks(): Promise<string[]> {
    return [...this.sandboxes.keys(), ...this.keptDisks];
  }

  async consoleTail(id: string): Promise<Buffer | undefined> {
    return this.sandboxes.has(id) ? Buffer.from(`{"level":"info","time":"${new Date().toISOString()}","msg":"envd started"}\n`) : undefined;
  }

  async list(): Promise<ObservedSandbox[]> {
    return [...this.sandboxes.values()].map((s) => ({ ...s.addr, status: s.status }));
  }

  async alive(): Promise<ReadonlySet<string>> {
    return new Set([...this.sandboxes.values()].filter((s) => s.status !== "stopped").map((s) => s.addr.sandboxID));
  }

  async sweep(): Promise<void> {
    this.record("sweep", "");
  }

  /** Runs nothing: the fake has no root filesystems to run in. */
  async runOnce(): Promise<RunOnceResult> {
    throw new Error("runOnce is not supported by the fake runtime");
  }

  private get(id: string): FakeSandbox {
    const sb = this.sandboxes.get(id);
    if (!sb) throw new Error(`no sandbox ${id}`);
    return sb;
  }

  private record(op: RuntimeOp, sandboxID: string): void {
    const call = { op, sandboxID };
    this.calls.push(call);
    this.events.emit("call", call);
  }
}

function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

/** What the fake envd was asked. */
export interface FakeEnvd {
  connect: EnvdConnector;
  inits: { addr: EnvdAddress; settings: InitSettings }[];
  commands: { addr: EnvdAddress; cmd: string }[];
  /** Makes /init fail (envd refuses) while set. */
  failInit?: string;
}

/** An envd for every fake sandbox: /init answers with version 0.6.13, every command exits 0. */
export function fakeEnvd(): FakeEnvd {
  const f: FakeEnvd = {
    inits: [],
    commands: [],
    connect: (addr): EnvdClient => ({
      async init(settings) {
        if (f.failInit) throw new Error(f.failInit);
        f.inits.push({ addr, settings });
        return "0.6.13";
      },
      async run(cmd) {
        f.commands.push({ addr, cmd });
        return 0;
      },
      async startCommand(_as, startCmd, readyCmd) {
        for (const cmd of [startCmd, readyCmd]) if (cmd) f.commands.push({ addr, cmd });
      },
      async metrics() {
        return { cpu_count: 1, mem_total: 512 * 2 ** 20 };
      },
      close: () => undefined,
    }),
  };
  return f;
}

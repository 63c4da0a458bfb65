/**
 * The sandbox runtime contract: what the control plane asks of whatever runs sandboxes, and the
 * one-off commands of template builds (`runOnce`). The runc backend implements it on one machine;
 * a Kubernetes backend (one pod per sandbox, one per build step) can follow without touching the
 * API, the store, the proxy or the template builder. Every method is idempotent where the OCI
 * runtime's own verbs are (stop of a stopped sandbox, thaw of a running one succeed). A backend
 * does not own the sandboxes' network: it is given one (host/sandbox-network.ts).
 */
import type { EgressPolicy } from "../host/sandbox-network.js";

/** What a sandbox is made from and how large it may grow. */
export interface SandboxSpec {
  /** Sandbox ID ("i" + 20 of [a-z0-9]); also the hostname inside the sandbox. */
  sandboxID: string;
  /** Template ID and build ID, for labels and the sandbox's own /.e2b file. */
  templateID: string;
  buildID: string;
  /** Read-only root filesystem of the template build (the overlay's lower directory). */
  rootfs: string;
  cpuCount: number;
  memoryMB: number;
  /** Size of the sandbox's writable disk (the runc backend: a thin ext4 image under the overlay's upper layer). */
  diskSizeMB: number;
  /** Outbound rules the sandbox starts with; none: every public destination is allowed. */
  egress?: EgressPolicy;
  /**
   * Started ahead of need (a warm-pool sandbox): it gets the smallest CPU share, so that it
   * yields to every live sandbox and to sandboxd, until `foreground` gives it its own.
   */
  background?: boolean;
  /** Start on a copy of this snapshot's disk (made by `snapshot`) instead of an empty one; its size is the snapshot's. */
  fromSnapshot?: string;
  /** Start on the sandbox's own disk, kept by `stop(…, {keepDisk: true})` (a cold start of a sandbox paused to disk). */
  keptDisk?: boolean;
}

/** Where a started sandbox answers: its address on the host and envd's port there. */
export interface SandboxAddress {
  sandboxID: string;
  /** IPv4 address of the sandbox, reachable from the host (the proxy dials it). */
  ip: string;
  /** envd's port inside the sandbox (49983). */
  envdPort: number;
}

/** What the runtime finds on the host for one sandbox (start-up reconciliation). */
export interface ObservedSandbox extends SandboxAddress {
  /** running: processes live; paused: frozen in memory; stopped: made but not running. */
  status: "running" | "paused" | "stopped";
}

/**
 * One command run to its end in a root filesystem the caller made and mounted (a template
 * build's step): isolated as a sandbox is, under its own limits, with no envd.
 */
export interface RunOnceSpec {
  /** Name of the run, unique among live runs ([a-z0-9-], at most 64). */
  runID: string;
  /** The root filesystem the command sees as `/`; writable: what the command changes stays there. */
  rootfs: string;
  argv: string[];
  /** Numeric ids inside (the caller resolves a user name in its image). */
  user: { uid: number; gid: number };
  env: Record<string, string>;
  /** Working directory inside; it must exist. */
  cwd: string;
  cpuCount: number;
  memoryMB: number;
  /** Most processes (and threads) the run may have at once. */
  pidsLimit: number;
  /** "loopback": a network of its own with only the loopback interface (nothing leaves it). */
  network: "loopback";
  /** Host directories bind-mounted read-only inside. */
  binds?: { source: string; destination: string }[];
  /** How long the command may run before it is killed. */
  timeoutMs: number;
  /** Each line the command writes to stdout or stderr (a line longer than 4 KiB is cut there). */
  onLine(line: string): void;
}

/** How a run ended: its exit code (null: killed by a signal), and whether its timeout killed it. */
export interface RunOnceResult {
  exitCode: number | null;
  timedOut: boolean;
}

/** The backend that makes, freezes and removes sandboxes. */
export interface Runtime {
  /**
   * Makes the sandbox (rootfs layer, isolation, network slot, limits) and starts its PID 1 with
   * envd beside it; resolves once envd's port accepts connections. Anything made is removed
   * again when it fails.
   */
  create(spec: SandboxSpec, signal?: AbortSignal): Promise<SandboxAddress>;
  /** Freezes every process of the sandbox in memory (true pause); a frozen sandbox stays frozen. */
  freeze(sandboxID: string): Promise<void>;
  /** Thaws a frozen sandbox; a running one is left as it is. */
  thaw(sandboxID: string): Promise<void>;
  /** Gives a sandbox started in the background the CPU share `cpuCount` earns (as a normal create has). */
  foreground(sandboxID: string, cpuCount: number): Promise<void>;
  /** Claims the host network (refused when another instance's range overlaps) before anything else runs; create also does this. */
  start?(): Promise<void>;
  /** Releases what the host keeps for the runtime when no sandbox is left (sandboxes outlive the process). */
  close?(): Promise<void>;
  /** Replaces a live sandbox's outbound rules: new connections follow them, established ones live on. */
  setEgress(sandboxID: string, policy: EgressPolicy): Promise<void>;
  /** Kills the sandbox and removes all it owns (processes, layer, disk, network slot, cgroup); unknown IDs succeed. */
  remove(sandboxID: string): Promise<void>;
  /**
   * Kills the sandbox and frees what it holds while running (processes, memory, network slot,
   * cgroup); with `keepDisk` its disk stays, for a later `create` with `keptDisk` under the same ID.
   */
  stop(sandboxID: string, opts: { keepDisk: boolean }): Promise<void>;
  /**
   * Records a consistent copy of the sandbox's disk as snapshot `snapshotID` (the sandbox is held
   * still for the instant of the copy and left as it was: running, frozen or stopped). Resolves
   * with the bytes the copy holds (extents shared with the disk count in full). `copies`: how many
   * disks will be made from it (default: any number); a copy for one disk may be left for that
   * disk's first mount to finish (its journal replayed there rather than once in the copy).
   */
  snapshot(sandboxID: string, snapshotID: string, opts?: { copies?: number }): Promise<{ sizeBytes: number }>;
  /** Removes a snapshot's copy; an unknown one succeeds. */
  removeSnapshot(snapshotID: string): Promise<void>;
  /** IDs of the snapshots the runtime holds. */
  snapshots(): Promise<string[]>;
  /** IDs of the sandboxes whose disk the runtime holds, running or kept by a stop. */
  disks(): Promise<string[]>;
  /**
   * The last `maxBytes` (or fewer) of what the sandbox's PID 1 and envd wrote to their stdout and
   * stderr; undefined for a sandbox this runtime does not have. Its bytes are the sandbox's: any
   * of them may be garbage.
   */
  consoleTail(sandboxID: string, maxBytes: number): Promise<Buffer | undefined>;
  /** Every sandbox this runtime instance owns on the host, as found now. */
  list(): Promise<ObservedSandbox[]>;
  /** IDs of this instance's sandboxes whose processes run (frozen ones included): a cheap look, for the loop that notices deaths. */
  alive(): Promise<ReadonlySet<string>>;
  /** Removes leftovers (half-made layers, slots, cgroups) of sandboxes not in `keep`. */
  sweep(keep: ReadonlySet<string>): Promise<void>;
  /**
   * Runs one command to its end (see RunOnceSpec) and resolves with how it ended; an abort kills
   * it. Whatever the run made besides its changes to `rootfs` is gone when the promise settles.
   */
  runOnce(spec: RunOnceSpec, signal?: AbortSignal): Promise<RunOnceResult>;
  /** Removes what runs of a process that died left behind (processes, state, cgroups); live runs of this one are kept. */
  sweepRuns?(): Promise<void>;
}

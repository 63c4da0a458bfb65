import { Code, ConnectError } from "@connectrpc/connect";
import type { ProcessConfig, ProcessEvent } from "../gen/process/process_pb.js";
import { Broadcast } from "./broadcast.js";
import { chunkedDataEvent, endEvent, eventSize, type OutputKind } from "./events.js";
import { endFields, type EndFields, type ExitInfo } from "./exit-status.js";
import { signalTree } from "./tree.js";
import { Lifetime } from "./lifetime.js";
import type { ChildIo } from "./child-io.js";
import { OUTPUT_LIMITS, tooFarBehind } from "./limits.js";
import type { Lease } from "./read-slabs.js";

/** After the main process exits, how long output may still flow before the end event is sent anyway. */
export const EXIT_GRACE_MS = 300;

/**
 * Output that may still arrive after the exit while the grace is being confirmed. A process
 * that exited leaves at most its pipes' capacity unread (≤ 1 MiB each by default); more means
 * someone else (a grandchild) is writing, and the grace then runs out regardless.
 */
export const EXIT_DRAIN_BYTES = 4 * 1024 * 1024;

/** How long SendSignal waits for the signalled process to be reaped. */
const REAP_WAIT_MS = 2000;

/**
 * One process started by envd: its request config and tag, its output broadcast, input,
 * signals, and the end event. The end event is sent once the process exited and its
 * output reached EOF, or once output has flowed for EXIT_GRACE_MS after the exit (so a
 * grandchild holding the pipes open cannot hold it forever; its later output is drained
 * and dropped, never left to block it). An expired grace is only acted on after the loop
 * has polled for I/O and found no new output (see graceExpired), so a busy daemon never
 * cuts the last output of a process whose pipes it simply had not read yet.
 */
export class ProcessHandle {
  /** Every subscriber's view of the output, ending with the end event. */
  readonly output: Broadcast<ProcessEvent>;
  private io: ChildIo | undefined;
  private openOutputs = 0;
  private paused = false;
  private exitInfo: ExitInfo | undefined;
  private exitWaiters: (() => void)[] = [];
  private graceTimer: NodeJS.Timeout | undefined;
  private graceLeft = EXIT_GRACE_MS;
  private graceStart = 0;
  private confirming: NodeJS.Immediate | undefined;
  private reads = 0;
  private bytesAfterExit = 0;
  private readonly lifetime = new Lifetime(() => signalTree(this.pid, "SIGKILL"), () => this.exitInfo !== undefined);
  private endCallbacks: ((end: EndFields) => void)[] = [];
  private outputsClosedCallbacks: (() => void)[] = [];
  private endResult: EndFields | undefined;

  constructor(
    readonly config: ProcessConfig,
    readonly tag: string | undefined,
    readonly isPty: boolean,
  ) {
    this.output = new Broadcast<ProcessEvent>(OUTPUT_LIMITS, eventSize, tooFarBehind, () => this.onDrain());
  }

  /** The process id (valid once attached). */
  get pid(): number {
    return this.io?.pid ?? 0;
  }

  /** The end event's fields once sent. */
  get end(): EndFields | undefined {
    return this.endResult;
  }

  /** Connects the spawned OS process; `outputs` is how many output streams will report EOF. */
  attach(io: ChildIo, outputs: number): void {
    this.io = io;
    this.openOutputs = outputs;
  }

  /** Registers a callback for the end event (called once, after subscribers got it). */
  onEnd(cb: (end: EndFields) => void): void {
    if (this.endResult) cb(this.endResult);
    else this.endCallbacks.push(cb);
  }

  /** Whether envd still holds an output pipe of this process open (after the end: a background child keeps it). */
  get outputsOpen(): boolean {
    return this.openOutputs > 0;
  }

  /** Registers a callback for when every output stream has closed (called at once if they have). */
  onOutputsClosed(cb: () => void): void {
    if (this.openOutputs === 0) cb();
    else this.outputsClosedCallbacks.push(cb);
  }

  /** Output was read from the process (before any coalescing); `data` delivers it later. */
  arrived(bytes: number): void {
    this.reads++;
    if (this.exitInfo) this.bytesAfterExit += bytes;
  }

  /**
   * Output from the process (one read, or several in arrival order): fanned out as events of
   * at most `maxChunk` bytes; reads are grouped whole into events, never copied together.
   * With a `lease` (reads in reused slabs), every subscriber that queues an event holds it.
   */
  data(kind: OutputKind, reads: Buffer | readonly Buffer[], maxChunk: number, lease?: Lease): void {
    if (this.endResult) return;
    this.reads++;
    let group: Buffer[] = [];
    let size = 0;
    const flush = (): void => {
      if (size === 0) return;
      const queued = this.output.publish(chunkedDataEvent(kind, group, size, lease));
      lease?.hold(queued);
      group = [];
      size = 0;
    };
    for (const read of Buffer.isBuffer(reads) ? [reads] : reads) {
      for (let off = 0; off < read.length; off += maxChunk) {
        const piece = read.length <= maxChunk ? read : read.subarray(off, off + maxChunk);
        if (size + piece.length > maxChunk) flush();
        group.push(piece);
        size += piece.length;
      }
    }
    flush();
    if (!this.paused && this.output.saturated) this.setPaused(true);
  }

  /** One output stream reached EOF. */
  eof(): void {
    this.openOutputs = Math.max(0, this.openOutputs - 1);
    if (this.openOutputs === 0) for (const cb of this.outputsClosedCallbacks.splice(0)) cb();
    this.maybeFinish();
  }

  /** The process was reaped. */
  exited(info: ExitInfo): void {
    if (this.exitInfo) return;
    this.exitInfo = info;
    this.lifetime.clear();
    for (const w of this.exitWaiters.splice(0)) w();
    this.maybeFinish();
  }

  /** True once the process was reaped. */
  get hasExited(): boolean {
    return this.exitInfo !== undefined;
  }

  /** SIGKILLs the process tree at `endsAt` (performance.now() ms) unless it exits first; see Lifetime. */
  limitLifetime(endsAt: number, signal?: AbortSignal): void {
    this.lifetime.limit(endsAt, signal);
  }

  /** Signals the process tree, then waits (bounded) until the process is reaped. */
  async signal(sig: NodeJS.Signals): Promise<void> {
    // After the exit this still reaches children left in the group (holding the output open).
    const err = signalTree(this.pid, sig, this.exitInfo !== undefined);
    if (err) throw new ConnectError(`error sending signal: ${err.message}`, Code.Internal, undefined, undefined, err);
    await this.waitExit(REAP_WAIT_MS);
  }

  /** Resolves when the process is reaped or `ms` passed. */
  waitExit(ms: number): Promise<void> {
    if (this.exitInfo) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.exitWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Writes to the stdin pipe (non-PTY processes). */
  async writeStdin(bytes: Uint8Array): Promise<void> {
    if (this.isPty) {
      throw internal("error writing to stdin: tty assigned to process — input should be written to the pty, not the stdin");
    }
    const stdin = this.io?.stdin;
    if (!stdin || !stdin.writable) throw internal("error writing to stdin: stdin not enabled or closed");
    if (bytes.byteLength === 0) return;
    try {
      await stdin.write(bytes);
    } catch (err) {
      if (err instanceof ConnectError) throw err;
      throw internal(`error writing to stdin: ${(err as Error).message}`, err);
    }
  }

  /** Writes to the terminal (PTY processes). */
  async writePty(bytes: Uint8Array): Promise<void> {
    const term = this.io?.terminal;
    if (!this.isPty || !term) {
      throw internal("error writing to tty: tty not assigned to process — input should be written to the stdin, not the tty");
    }
    try {
      term.write(bytes);
    } catch (err) {
      throw internal(`error writing to tty: ${(err as Error).message}`, err);
    }
  }

  /** Closes stdin (EOF for the process); idempotent; an error for PTY processes. */
  closeStdin(): void {
    if (this.isPty) {
      throw new ConnectError("error closing stdin: cannot close stdin for PTY process — send Ctrl+D (0x04) instead", Code.Unknown);
    }
    this.io?.stdin?.close();
  }

  /** Resizes the terminal; an error for non-PTY processes. */
  resize(cols: number, rows: number): void {
    const term = this.io?.terminal;
    if (!this.isPty || !term) throw internal("error resizing tty: tty not assigned to process");
    if (!(cols > 0 && rows > 0)) throw new ConnectError("pty size must have positive cols and rows", Code.InvalidArgument);
    try {
      term.resize(cols, rows);
    } catch (err) {
      throw internal(`error resizing tty: ${(err as Error).message}`, err);
    }
  }

  /** Stops timers and lets go of the process's pipes (daemon shutdown); the process keeps running. */
  release(): void {
    this.lifetime.clear();
    clearTimeout(this.graceTimer);
    clearImmediate(this.confirming);
    this.io?.release();
  }

  private onDrain(): void {
    if (this.paused && !this.output.saturated) this.setPaused(false);
  }

  private setPaused(paused: boolean): void {
    this.paused = paused;
    if (paused) {
      this.io?.pause();
      if (this.graceTimer) {
        clearTimeout(this.graceTimer);
        this.graceTimer = undefined;
        this.graceLeft -= Date.now() - this.graceStart;
      }
    } else {
      this.io?.resume();
      this.maybeFinish();
    }
  }

  private maybeFinish(): void {
    if (!this.exitInfo || this.endResult) return;
    if (this.openOutputs === 0) return this.finish();
    // Grace time only runs while we read: a paused reader is waiting on a subscriber, not a grandchild.
    if (this.paused || this.graceTimer || this.confirming) return;
    this.graceStart = Date.now();
    this.graceTimer = setTimeout(() => this.graceExpired(), Math.max(0, this.graceLeft));
  }

  /**
   * The grace ran out. Timers run before the loop polls for I/O, so after a long turn output
   * already waiting in a pipe has not been read yet: decide after the next poll (in the check
   * phase), and keep waiting while each poll still brings output, up to EXIT_DRAIN_BYTES.
   */
  private graceExpired(): void {
    this.graceTimer = undefined;
    this.graceLeft = 0;
    this.confirmAfterPoll(this.reads);
  }

  private confirmAfterPoll(seen: number): void {
    this.confirming = setImmediate(() => {
      this.confirming = undefined;
      // Paused: resuming calls maybeFinish, which confirms again after the reader ran.
      if (this.endResult || this.paused) return;
      if (this.reads !== seen && this.bytesAfterExit <= EXIT_DRAIN_BYTES) return this.confirmAfterPoll(this.reads);
      this.finish();
    });
  }

  private finish(): void {
    if (this.endResult || !this.exitInfo) return;
    clearTimeout(this.graceTimer);
    clearImmediate(this.confirming);
    this.endResult = endFields(this.exitInfo);
    this.output.close(endEvent(this.endResult));
    // Keep draining (and dropping) what lingering children write, so they never block on a full pipe.
    if (this.paused) {
      this.paused = false;
      this.io?.resume();
    }
    for (const cb of this.endCallbacks.splice(0)) cb(this.endResult);
  }
}

function internal(message: string, cause?: unknown): ConnectError {
  return new ConnectError(message, Code.Internal, undefined, undefined, cause);
}

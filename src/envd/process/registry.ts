import { Code, ConnectError } from "@connectrpc/connect";
import type { ProcessSelector } from "../gen/process/process_pb.js";
import type { EndFields } from "./exit-status.js";
import type { ProcessHandle } from "./handle.js";
import { EXIT_RETENTION_MS } from "./limits.js";

/** A process that ended recently: enough for a late Connect to get start + end. */
export interface RetainedExit {
  readonly pid: number;
  readonly tag: string | undefined;
  readonly end: EndFields;
  timer?: NodeJS.Timeout;
}

/** What a selector found: a live process, or the retained exit of one that ended. */
export type Found = { live: ProcessHandle } | { exit: RetainedExit };

/**
 * The table of live processes by pid, plus exits retained for `retentionMs` (by pid, also
 * findable by tag). A new process reusing a pid or tag discards the predecessor's retained exit.
 */
export class ProcessRegistry {
  private readonly live = new Map<number, ProcessHandle>();
  private readonly exits = new Map<number, RetainedExit>();
  /** Starts holding a slot (see reserve) that are not in `live` yet. */
  private starting = 0;
  /**
   * Ended processes whose output pipes a background child still holds open: envd keeps reading
   * (and dropping) that output, so each holds two descriptors of the daemon and a slot until the
   * pipes close, as the reference keeps such a process until EOF. Without counting them, a loop
   * of `sh -c 'sleep 1000 &'` would exhaust the daemon's descriptors.
   */
  private readonly lingering = new Set<ProcessHandle>();

  constructor(
    private readonly maxLive: number,
    private readonly retentionMs = EXIT_RETENTION_MS,
  ) {}

  /** Throws resource_exhausted when the live-process limit is reached (lingering outputs count). */
  checkCapacity(): void {
    if (this.live.size + this.starting + this.lingering.size < this.maxLive) return;
    const held = this.lingering.size;
    const why = held > 0 ? ` (${held} of them ended, but background children they left hold their output open; end those children to free the slots)` : "";
    throw new ConnectError(`too many processes: the limit of ${this.maxLive} live processes is reached${why}`, Code.ResourceExhausted);
  }

  /** How many ended processes still hold their output pipes open. */
  get lingeringCount(): number {
    return this.lingering.size;
  }

  /**
   * Holds a slot for a Start that is about to spawn (throws resource_exhausted when none is
   * left); the slot counts until the returned release is called, after `add` or on failure.
   * Starts wait for their spawn turn, so checking without holding would let a burst through.
   */
  reserve(): () => void {
    this.checkCapacity();
    this.starting++;
    let held = true;
    return () => {
      if (held) this.starting--;
      held = false;
    };
  }

  /** Adds a spawned process; it leaves the table when its end event was sent. */
  add(handle: ProcessHandle): void {
    const pid = handle.pid;
    this.dropExit(pid);
    if (handle.tag !== undefined) for (const e of [...this.exits.values()]) if (e.tag === handle.tag) this.dropExit(e.pid);
    this.live.set(pid, handle);
    handle.onEnd((end) => this.ended(handle, end));
  }

  /** Every live process. */
  list(): ProcessHandle[] {
    return [...this.live.values()];
  }

  /** Finds a live process or a retained exit; not_found otherwise, invalid_argument for an empty selector. */
  find(selector: ProcessSelector | undefined): Found {
    const sel = selector?.selector;
    if (sel?.case === "pid") {
      const live = this.live.get(sel.value);
      if (live) return { live };
      const exit = this.exits.get(sel.value);
      if (exit) return { exit };
      throw new ConnectError(`process with pid ${sel.value} not found`, Code.NotFound);
    }
    if (sel?.case === "tag") {
      for (const h of this.live.values()) if (h.tag === sel.value) return { live: h };
      for (const e of this.exits.values()) if (e.tag === sel.value) return { exit: e };
      throw new ConnectError(`process with tag ${sel.value} not found`, Code.NotFound);
    }
    throw new ConnectError("process selector must set pid or tag", Code.InvalidArgument);
  }

  /** Finds a live process; not_found when it is gone (even if its exit is retained). */
  findLive(selector: ProcessSelector | undefined): ProcessHandle {
    const found = this.find(selector);
    if ("live" in found) return found.live;
    const sel = selector?.selector;
    const what = sel?.case === "tag" ? `tag ${sel.value}` : `pid ${found.exit.pid}`;
    throw new ConnectError(`process with ${what} not found`, Code.NotFound);
  }

  /** Stops every retention timer and empties the exit cache. */
  close(): void {
    for (const e of this.exits.values()) clearTimeout(e.timer);
    this.exits.clear();
    for (const h of this.lingering) h.release();
    this.lingering.clear();
  }

  private ended(handle: ProcessHandle, end: EndFields): void {
    const pid = handle.pid;
    // A successor may already hold this pid: then the stale exit is neither removed nor cached.
    if (this.live.get(pid) !== handle) return;
    this.live.delete(pid);
    const exit: RetainedExit = { pid, tag: handle.tag, end };
    exit.timer = setTimeout(() => {
      if (this.exits.get(pid) === exit) this.exits.delete(pid);
    }, this.retentionMs);
    exit.timer.unref();
    this.exits.set(pid, exit);
    if (handle.outputsOpen) {
      this.lingering.add(handle);
      handle.onOutputsClosed(() => this.lingering.delete(handle));
    }
  }

  private dropExit(pid: number): void {
    const e = this.exits.get(pid);
    if (!e) return;
    clearTimeout(e.timer);
    this.exits.delete(pid);
  }
}

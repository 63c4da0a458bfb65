import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { EventType, FilesystemEventSchema, type FilesystemEvent } from "../gen/filesystem/filesystem_pb.js";
import type { HubSubscriber, InotifyHub } from "./hub.js";
import type { InotifyAddon, RawEvent } from "./inotify.js";
import { entryInfoSync, type NameLookup } from "./entry-info.js";
import { EventBuffer } from "./event-buffer.js";
import { goError } from "./go-error.js";
import { SLICE_ENTRIES, TreeWalk } from "./watch-walk.js";

/** How one watch behaves. */
export interface WatchOptions {
  /** The watched directory as requested (resolved, not symlink-resolved): event names are relative to it. */
  root: string;
  recursive: boolean;
  includeEntry: boolean;
  names: NameLookup;
  /** Most undelivered events held; beyond it the watch fails instead of growing or dropping. */
  maxPending: number;
}

type Constants = InotifyAddon["constants"];

/** The event types one kernel mask yields, in the reference's fixed order (CREATE, RENAME, CHMOD, WRITE, REMOVE). */
export function eventTypes(mask: number, c: Constants): EventType[] {
  const out: EventType[] = [];
  if (mask & (c.IN_CREATE | c.IN_MOVED_TO)) out.push(EventType.CREATE);
  if (mask & (c.IN_MOVED_FROM | c.IN_MOVE_SELF)) out.push(EventType.RENAME);
  if (mask & c.IN_ATTRIB) out.push(EventType.CHMOD);
  if (mask & c.IN_MODIFY) out.push(EventType.WRITE);
  if (mask & (c.IN_DELETE | c.IN_DELETE_SELF)) out.push(EventType.REMOVE);
  return out;
}

/** The kernel events every watch asks for (not open, access or close-write, as the reference). */
export function watchMask(c: Constants): number {
  return c.IN_CREATE | c.IN_MODIFY | c.IN_ATTRIB | c.IN_MOVED_FROM | c.IN_MOVED_TO | c.IN_DELETE | c.IN_DELETE_SELF | c.IN_MOVE_SELF;
}

/** Describes an inotify_add_watch failure; the watch limit gets a plain-words message and resource_exhausted. */
export function addWatchError(path: string, err: unknown): ConnectError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOSPC") {
    return new ConnectError(`error adding path ${path} to watcher: inotify watch limit reached`, Code.ResourceExhausted, undefined, undefined, err);
  }
  if (code === "EMFILE") {
    return new ConnectError(`error adding path ${path} to watcher: inotify instance limit reached`, Code.ResourceExhausted, undefined, undefined, err);
  }
  if (err instanceof ConnectError) return err;
  const detail = (err as NodeJS.ErrnoException).syscall ? goError(err) : (err as Error).message;
  return new ConnectError(`error adding path ${path} to watcher: ${detail}`, Code.Internal, undefined, undefined, err);
}

/**
 * One directory watch (WatchDir stream or polling watcher): maps kernel events to
 * FilesystemEvents relative to the root, follows new directories in recursive mode, and
 * buffers events up to a bound. A failure is terminal and reported, never swallowed.
 *
 * A directory that appears in a recursive watch is walked (watched, its contents announced) in
 * slices that yield to the event loop (see TreeWalk); kernel events that arrive meanwhile wait
 * in order and are handled once the walk is over, so a walk's CREATEs always come first.
 */
export class DirWatch implements HubSubscriber {
  private readonly wdRel = new Map<number, string>();
  private readonly buffer: EventBuffer;
  private closed = false;
  /** Paths announced by a synthetic walk in this batch / the previous one: the kernel's own CREATE for them is a duplicate. */
  private announced = new Set<string>();
  private suppress = new Set<string>();
  /** The walk of a directory that appeared, while one runs, and the kernel events waiting for it. */
  private walk: TreeWalk | undefined;
  private waiting: RawEvent[] = [];
  private waitingHead = 0;
  private handlingWaiting = false;
  private readonly c: Constants;
  private readonly mask: number;

  constructor(
    private readonly hub: InotifyHub,
    private readonly opts: WatchOptions,
  ) {
    this.c = hub.constants;
    this.mask = watchMask(this.c);
    this.buffer = new EventBuffer(opts.maxPending);
  }

  /** Arms the watch: the root, and in recursive mode every directory below it (unreadable ones skipped). */
  async arm(): Promise<void> {
    this.hub.join(this);
    try {
      this.addDir(this.opts.root, "", this.c.IN_ONLYDIR);
      if (this.opts.recursive) await this.armTree();
    } catch (err) {
      this.close();
      throw addWatchError(this.opts.root, err);
    }
    if (this.buffer.failed) throw this.buffer.failed;
  }

  private async armTree(): Promise<void> {
    const stack = [""];
    let added = 0;
    while (stack.length > 0 && !this.closed) {
      const rel = stack.pop()!;
      let entries;
      try {
        entries = await readdir(join(this.opts.root, rel), { withFileTypes: true });
      } catch {
        continue;
      }
      for (const e of entries) {
        if (!e.isDirectory()) continue;
        const child = rel ? rel + "/" + e.name : e.name;
        try {
          this.addDir(join(this.opts.root, child), child, this.c.IN_ONLYDIR | this.c.IN_DONT_FOLLOW);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === "ENOSPC" || (err as NodeJS.ErrnoException).code === "EMFILE") throw err;
          continue;
        }
        stack.push(child);
        // A directory of many subdirectories: one watch each, so yield to the loop now and then.
        if (++added % SLICE_ENTRIES === 0) await new Promise((resolve) => setImmediate(resolve));
      }
    }
  }

  private addDir(abs: string, rel: string, flags: number): void {
    const wd = this.hub.add(this, abs, this.mask | flags);
    this.wdRel.set(wd, rel);
  }

  /** Handles one kernel event (see envd-behaviour §6.6 for the mapping), or queues it behind a running walk. */
  onEvent(ev: RawEvent): void {
    if (this.closed || this.buffer.failed) return;
    if (!this.walk) return this.handle(ev);
    if (this.waiting.length - this.waitingHead >= this.opts.maxPending) return this.onFail(`event buffer overflow: more than ${this.opts.maxPending} events not yet read`);
    this.waiting.push(ev);
  }

  private handle(ev: RawEvent): void {
    const c = this.c;
    // The kernel dropped the descriptor: handled in turn, after the events before it that waited.
    if (ev.mask & c.IN_IGNORED) return void this.wdRel.delete(ev.wd);
    const dir = this.wdRel.get(ev.wd);
    if (dir === undefined) return;
    if (ev.name === "") {
      // A subdirectory's own events are also reported by its parent: keep only the root's.
      if (dir !== "") return;
      this.emit(".", ev.mask);
      if (ev.mask & (c.IN_DELETE_SELF | c.IN_MOVE_SELF)) this.detach();
      return;
    }
    const rel = dir ? dir + "/" + ev.name : ev.name;
    let mask = ev.mask;
    if (mask & (c.IN_CREATE | c.IN_MOVED_TO) && (this.suppress.delete(rel) || this.announced.delete(rel))) mask &= ~(c.IN_CREATE | c.IN_MOVED_TO);
    this.emit(rel, mask);
    if (!this.opts.recursive || !(mask & c.IN_ISDIR)) return;
    if (mask & (c.IN_MOVED_FROM | c.IN_DELETE)) this.dropTree(rel);
    if (mask & (c.IN_CREATE | c.IN_MOVED_TO)) this.addTree(rel);
  }

  /** Forgets a descriptor the kernel dropped (its IN_IGNORED event waits behind a running walk instead). */
  onIgnored(wd: number): void {
    if (!this.walk) this.wdRel.delete(wd);
  }

  /** Makes the watch fail terminally with `watcher error: <message>`. */
  onFail(message: string): void {
    if (this.buffer.failed || this.closed) return;
    this.buffer.fail(message);
    this.detach();
    this.hub.leave(this);
  }

  /** Ends the window in which kernel CREATEs duplicating a synthetic walk are suppressed (which stays open while a walk runs). */
  onBatchEnd(): void {
    if (this.walk) return;
    this.suppress = this.announced;
    this.announced = new Set();
  }

  private emit(rel: string, mask: number): void {
    for (const type of eventTypes(mask, this.c)) this.push(rel, type);
  }

  private push(name: string, type: EventType): void {
    if (this.buffer.failed) return;
    if (this.buffer.full) return this.onFail(`event buffer overflow: more than ${this.opts.maxPending} events not yet read`);
    const withEntry = this.opts.includeEntry && (type === EventType.CREATE || type === EventType.WRITE || type === EventType.CHMOD);
    const entry = withEntry ? entryInfoSync(join(this.opts.root, name), this.opts.names) : undefined;
    this.buffer.push(create(FilesystemEventSchema, { name, type, entry }));
  }

  /** Watches a directory that appeared in the tree and announces what it already contains (pre-order). */
  private addTree(rel: string): void {
    this.walk = new TreeWalk(this.opts.root, rel, {
      enter: (dir) => this.enter(dir),
      entry: (child) => {
        this.announced.add(child);
        this.push(child, EventType.CREATE);
      },
      alive: () => !this.closed && !this.buffer.failed,
    });
    this.walkOn();
  }

  /** Runs the walk until it is over or must wait, then handles the kernel events that waited for it. */
  private walkOn(): void {
    const waitFor = this.walk?.run();
    if (waitFor) {
      waitFor.then(
        () => this.walkOn(),
        (err: unknown) => this.onFail(`internal error walking a new directory: ${(err as Error).message}`),
      );
      return;
    }
    this.walk = undefined;
    this.handleWaiting();
  }

  /** Handles the events that waited for a walk, in order, until one of them starts another walk. */
  private handleWaiting(): void {
    // A walk started and finished by an event handled below lands here again: the loop goes on.
    if (this.handlingWaiting) return;
    this.handlingWaiting = true;
    try {
      while (this.waitingHead < this.waiting.length && !this.walk && !this.closed && !this.buffer.failed) {
        this.handle(this.waiting[this.waitingHead++]);
      }
      if (this.walk && !this.closed && !this.buffer.failed) return;
      this.waiting = [];
      this.waitingHead = 0;
    } finally {
      this.handlingWaiting = false;
    }
  }

  /** Watches a directory a walk reached; false when it cannot be watched (it is then not read). */
  private enter(rel: string): boolean {
    if (this.closed || this.buffer.failed) return false;
    const abs = join(this.opts.root, rel);
    try {
      this.addDir(abs, rel, this.c.IN_ONLYDIR | this.c.IN_DONT_FOLLOW);
      return true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOSPC" || code === "EMFILE") this.onFail(addWatchError(abs, err).rawMessage);
      return false;
    }
  }

  private dropTree(rel: string): void {
    for (const [wd, r] of [...this.wdRel]) {
      if (r === rel || r.startsWith(rel + "/")) {
        this.wdRel.delete(wd);
        this.hub.remove(this, wd);
      }
    }
  }

  private detach(): void {
    for (const wd of [...this.wdRel.keys()]) this.hub.remove(this, wd);
    this.wdRel.clear();
  }

  /** Reads and handles whatever the kernel has queued for this watch's inotify instance. */
  flush(): void {
    this.hub.flush();
  }

  /** Polling: every buffered event, clearing the buffer; a failed watch throws its error every time. */
  drain(): FilesystemEvent[] {
    return this.buffer.drain();
  }

  /** Streaming: events as they come until closed or `signal` aborts; buffered events go out before a failure. */
  events(signal: AbortSignal): AsyncGenerator<FilesystemEvent> {
    return this.buffer.stream(signal);
  }

  /** Stops watching and releases every kernel watch this watch held. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.waiting = [];
    this.waitingHead = 0;
    this.detach();
    this.hub.leave(this);
    this.buffer.end();
  }
}

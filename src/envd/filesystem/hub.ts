import { loadInotify, parseEvents, type InotifyAddon, type InotifyHandle, type RawEvent } from "./inotify.js";

/** What the hub delivers to one watcher (a DirWatch). */
export interface HubSubscriber {
  /** A kernel event on a watch descriptor this subscriber added. */
  onEvent(ev: RawEvent): void;
  /** The kernel dropped a watch descriptor (directory deleted, unmounted, or removed). */
  onIgnored(wd: number): void;
  /** The hub's inotify instance failed (queue overflow, read error): terminal for every subscriber of that hub. */
  onFail(message: string): void;
  /** Every event of one read has been delivered. */
  onBatchEnd(): void;
}

/**
 * One inotify instance shared by the watchers the pool (HubPool) gives it. Watch descriptors
 * are per inode, so several watchers can share one; it is removed when its last subscriber
 * leaves. A queue overflow loses events of this instance only: its watchers fail, no others.
 */
export class InotifyHub {
  private handle: InotifyHandle | undefined;
  private readonly byWd = new Map<number, Set<HubSubscriber>>();
  private readonly members = new Set<HubSubscriber>();

  constructor(private readonly load: () => InotifyAddon = loadInotify) {}

  /** The addon's constants (loads the addon; throws when it is unavailable). */
  get constants(): InotifyAddon["constants"] {
    return this.load().constants;
  }

  /** How many watchers use this instance. */
  get size(): number {
    return this.members.size;
  }

  /** Whether the kernel instance is open. */
  get isOpen(): boolean {
    return this.handle !== undefined;
  }

  /** Opens the kernel instance now (throws EMFILE when the per-user instance limit is reached). */
  open(): void {
    this.handle ??= this.load().open((status) => this.onReadable(status));
  }

  /** Registers a subscriber for batch-end and failure notices. */
  join(sub: HubSubscriber): void {
    this.members.add(sub);
  }

  /** Forgets a subscriber and releases every watch descriptor it held. */
  leave(sub: HubSubscriber): void {
    this.members.delete(sub);
    for (const wd of [...this.byWd.keys()]) this.remove(sub, wd);
    // An idle instance is closed: a live poll handle keeps the process alive, as fs.watch does.
    if (this.members.size === 0 && this.byWd.size === 0 && this.handle) {
      this.load().close(this.handle);
      this.handle = undefined;
    }
  }

  /** Adds (or shares) a watch on `path`; throws the errno error (ENOSPC, ENOENT, ...). */
  add(sub: HubSubscriber, path: string, mask: number): number {
    this.open();
    const wd = this.load().addWatch(this.handle!, path, mask);
    let subs = this.byWd.get(wd);
    if (!subs) this.byWd.set(wd, (subs = new Set()));
    subs.add(sub);
    return wd;
  }

  /** Drops a subscriber's interest in `wd`; the kernel watch goes when nobody else holds it. */
  remove(sub: HubSubscriber, wd: number): void {
    const subs = this.byWd.get(wd);
    if (!subs?.delete(sub) || subs.size > 0) return;
    this.byWd.delete(wd);
    if (this.handle) this.load().rmWatch(this.handle, wd);
  }

  /** Reads and dispatches whatever the kernel has queued right now (also used by polling watchers). */
  flush(): void {
    if (!this.handle) return;
    let buf: Buffer | null;
    try {
      buf = this.load().read(this.handle);
    } catch (err) {
      this.fail(`error reading inotify events: ${(err as Error).message}`);
      return;
    }
    if (buf) this.dispatch(parseEvents(buf));
  }

  /** Closes the instance; subscribers still joined are failed. */
  close(): void {
    this.fail("watcher closed: the daemon is shutting down");
  }

  private onReadable(status: number): void {
    if (status < 0) return this.fail(`inotify poll error ${status}`);
    try {
      this.flush();
    } catch (err) {
      // Nothing may escape into the native callback (it would be fatal): fail the watchers instead.
      this.fail(`internal error handling events: ${(err as Error).message}`);
    }
  }

  private dispatch(events: RawEvent[]): void {
    const c = this.load().constants;
    for (const ev of events) {
      if (ev.mask & c.IN_Q_OVERFLOW) {
        this.fail("inotify queue or buffer overflow: events were lost");
        return;
      }
      const subs = this.byWd.get(ev.wd);
      if (!subs) continue;
      for (const sub of [...subs]) sub.onEvent(ev);
      if (ev.mask & c.IN_IGNORED) {
        this.byWd.delete(ev.wd);
        for (const sub of subs) sub.onIgnored(ev.wd);
      }
    }
    for (const sub of [...this.members]) sub.onBatchEnd();
  }

  private fail(message: string): void {
    const members = [...this.members];
    this.members.clear();
    this.byWd.clear();
    if (this.handle) this.load().close(this.handle);
    this.handle = undefined;
    for (const sub of members) sub.onFail(message);
  }
}

/** Most inotify instances the daemon opens: the kernel allows few per user (fs.inotify.max_user_instances, often 128). */
export const MAX_INSTANCES = 16;

/**
 * The daemon's inotify instances: each new watcher gets an instance of its own while fewer than
 * `max` exist, else the least used one. A queue overflow (or read error) of one instance then
 * fails only the watchers on it, which may have lost events; every other watcher keeps going.
 */
export class HubPool {
  private readonly hubs: InotifyHub[] = [];

  constructor(
    private readonly load: () => InotifyAddon = loadInotify,
    private readonly max = MAX_INSTANCES,
  ) {}

  /** The addon's constants (loads the addon; throws when it is unavailable). */
  get constants(): InotifyAddon["constants"] {
    return this.load().constants;
  }

  /** The hub a new watcher should use (opened; throws only when no instance can be opened at all). */
  pick(): InotifyHub {
    this.load();
    const idle = this.hubs.find((h) => h.size === 0);
    const fresh = idle ?? (this.hubs.length < this.max ? this.add() : undefined);
    if (fresh) {
      try {
        fresh.open();
        return fresh;
      } catch (err) {
        // The per-user instance limit (others in the sandbox use inotify too): share an open one.
        const shared = this.leastUsed((h) => h.isOpen);
        if (!shared) throw err;
        return shared;
      }
    }
    const hub = this.leastUsed(() => true)!;
    hub.open();
    return hub;
  }

  /** Closes every instance; subscribers still joined are failed. */
  close(): void {
    for (const hub of this.hubs) hub.close();
  }

  private add(): InotifyHub {
    const hub = new InotifyHub(this.load);
    this.hubs.push(hub);
    return hub;
  }

  private leastUsed(ok: (h: InotifyHub) => boolean): InotifyHub | undefined {
    let best: InotifyHub | undefined;
    for (const h of this.hubs) if (ok(h) && (!best || h.size < best.size)) best = h;
    return best;
  }
}

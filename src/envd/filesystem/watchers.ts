import { crypto } from "../platform/crypto.js";
import { Code, ConnectError } from "@connectrpc/connect";
import type { FilesystemEvent } from "../gen/filesystem/filesystem_pb.js";
import type { NameLookup } from "./entry-info.js";
import { HubPool } from "./hub.js";
import { addWatchError, DirWatch } from "./dir-watch.js";
import { validateWatchPath } from "./watch-validate.js";

/** What a client asks of a watch (WatchDirRequest / CreateWatcherRequest). */
export interface WatchRequest {
  recursive: boolean;
  includeEntry: boolean;
  allowNetworkMounts: boolean;
}

/** Most undelivered events one watch holds before it fails with a buffer-overflow error. */
export const MAX_PENDING_EVENTS = 100_000;

const ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

/** A polling watcher id as the reference makes them: "w" + 20 characters of [a-z0-9]. */
export function newWatcherId(): string {
  let id = "w";
  for (let i = 0; i < 20; i++) id += ID_ALPHABET[crypto().randomInt(ID_ALPHABET.length)];
  return id;
}

/** How polling watchers expire. */
export interface PollingOptions {
  /** A polling watcher not polled (GetWatcherEvents) for this long is removed; 0: never. */
  idleMs: number;
  /** Told about each watcher removed for idleness. */
  onExpired?: (id: string, idleMs: number) => void;
}

/** A polling watcher and the timer that removes it when nobody polls it. */
interface Polled {
  readonly watch: DirWatch;
  readonly timer: NodeJS.Timeout | undefined;
}

/**
 * Every live watch of the daemon (WatchDir streams and polling watchers) over a small pool of
 * inotify instances, capped at `maxWatchers`; the polling ones are also indexed by id. A polling
 * watcher outlives its request, so one that nobody polls for `idleMs` is removed: forgotten
 * watchers cannot hold the cap (nor their kernel watches) for good.
 */
export class WatcherRegistry {
  private readonly hubs = new HubPool();
  private readonly live = new Set<DirWatch>();
  private readonly polling = new Map<string, Polled>();

  constructor(
    private readonly maxWatchers: number,
    private readonly names: NameLookup,
    private readonly pollingOptions: PollingOptions = { idleMs: 0 },
  ) {}

  /** Validates `path`, then arms a watch on it; the caller owns it and must release() it. */
  async open(path: string, req: WatchRequest): Promise<DirWatch> {
    await validateWatchPath(path, req.allowNetworkMounts);
    if (this.live.size >= this.maxWatchers) {
      throw new ConnectError(`too many watchers: the limit of ${this.maxWatchers} is reached`, Code.ResourceExhausted);
    }
    let watch: DirWatch;
    try {
      watch = new DirWatch(this.hubs.pick(), {
        root: path,
        recursive: req.recursive,
        includeEntry: req.includeEntry,
        names: this.names,
        maxPending: MAX_PENDING_EVENTS,
      });
    } catch (err) {
      // No inotify instance could be opened at all: the per-user limit, a resource problem.
      if ((err as NodeJS.ErrnoException).code === "EMFILE") throw addWatchError(path, err);
      throw new ConnectError(`filesystem watching is unavailable: ${(err as Error).message}`, Code.Internal, undefined, undefined, err);
    }
    this.live.add(watch);
    try {
      await watch.arm();
    } catch (err) {
      this.live.delete(watch);
      throw err;
    }
    return watch;
  }

  /** Closes a watch and frees its slot. */
  release(watch: DirWatch): void {
    watch.close();
    this.live.delete(watch);
  }

  /** CreateWatcher: a watch that outlives the request, drained by id. */
  async create(path: string, req: WatchRequest): Promise<string> {
    const watch = await this.open(path, req);
    let id = newWatcherId();
    while (this.polling.has(id)) id = newWatcherId();
    const { idleMs, onExpired } = this.pollingOptions;
    const timer = idleMs > 0 ? setTimeout(() => this.expire(id, onExpired), idleMs) : undefined;
    timer?.unref();
    this.polling.set(id, { watch, timer });
    return id;
  }

  /** GetWatcherEvents: everything that happened since the last call (kernel queue read first). */
  events(id: string): FilesystemEvent[] {
    const polled = this.lookup(id);
    polled.timer?.refresh();
    polled.watch.flush();
    return polled.watch.drain();
  }

  /** RemoveWatcher: stops and forgets a polling watcher. */
  remove(id: string): void {
    const polled = this.lookup(id);
    clearTimeout(polled.timer);
    this.polling.delete(id);
    this.release(polled.watch);
  }

  /** Closes every watch (daemon shutdown); open WatchDir streams end with an error. */
  async close(): Promise<void> {
    for (const polled of this.polling.values()) clearTimeout(polled.timer);
    this.polling.clear();
    this.hubs.close();
    for (const watch of this.live) watch.close();
    this.live.clear();
  }

  private expire(id: string, onExpired: PollingOptions["onExpired"]): void {
    if (!this.polling.has(id)) return;
    this.remove(id);
    onExpired?.(id, this.pollingOptions.idleMs);
  }

  private lookup(id: string): Polled {
    const polled = this.polling.get(id);
    if (!polled) throw new ConnectError(`watcher with id ${id} not found`, Code.NotFound);
    return polled;
  }
}

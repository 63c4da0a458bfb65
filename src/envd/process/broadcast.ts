import { Subscription } from "./subscription.js";

/** Limits of a broadcast: per-subscriber byte budget and the backlog that counts as "behind". */
export interface BroadcastLimits {
  /** A subscriber with more than this many bytes queued is ended with `tooFarBehind()`. */
  readonly maxBytes: number;
  /** Backlog at which a subscriber counts as full (the producer pauses once every subscriber is). */
  readonly highWater: number;
  /** Backlog below which a full subscriber counts as drained again. */
  readonly lowWater: number;
}

/**
 * Fans every published item out to every current subscriber, in order. Each subscriber has
 * its own bounded queue: one that falls more than `maxBytes` behind is ended with the error
 * from `tooFarBehind()` while the others go on. `saturated` tells the producer when every
 * subscriber is full, so reading can pause and the fastest subscriber sets the pace; a
 * stalled subscriber therefore never holds anyone back. With no subscriber, items are dropped.
 */
export class Broadcast<T> {
  private readonly subs = new Set<Subscription<T>>();
  private final: T | undefined;
  private isClosed = false;

  constructor(
    private readonly limits: BroadcastLimits,
    private readonly sizeOf: (item: T) => number,
    private readonly tooFarBehind: () => Error,
    /** Called whenever `saturated` may have turned false. */
    private readonly onDrain: () => void = () => undefined,
  ) {}

  /** True once `close` ran: new subscribers get only the final item. */
  get closed(): boolean {
    return this.isClosed;
  }

  /** True when there is at least one subscriber and every one of them is full. */
  get saturated(): boolean {
    if (this.subs.size === 0) return false;
    for (const s of this.subs) if (!s.full) return false;
    return true;
  }

  /** Number of current subscribers. */
  get size(): number {
    return this.subs.size;
  }

  /** Adds a subscriber that receives everything published from now on (or only the final item, once closed). */
  subscribe(): Subscription<T> {
    const sub = new Subscription<T>(this.limits, (s) => this.remove(s), () => this.onDrain());
    if (this.isClosed) {
      sub.finish(this.final);
      return sub;
    }
    this.subs.add(sub);
    // A newcomer is not full: if the producer paused because every earlier subscriber was
    // (frozen readers), it must resume, or the newcomer would wait forever.
    this.onDrain();
    return sub;
  }

  /** Queues `item` for every subscriber, ending the ones that fell too far behind; returns how many queued it. */
  publish(item: T): number {
    if (this.isClosed) return 0;
    const size = this.sizeOf(item);
    let removed = false;
    let queued = 0;
    for (const s of this.subs) {
      if (s.backlog + size > this.limits.maxBytes) {
        this.subs.delete(s);
        s.fail(this.tooFarBehind());
        removed = true;
      } else if (s.push(item, size)) {
        queued++;
      }
    }
    if (removed) this.onDrain();
    return queued;
  }

  /** Delivers `final` (if any) after everything queued, then ends every subscriber. */
  close(final?: T): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.final = final;
    for (const s of this.subs) s.finish(final);
    this.subs.clear();
    this.onDrain();
  }

  private remove(sub: Subscription<T>): void {
    if (this.subs.delete(sub)) this.onDrain();
  }
}

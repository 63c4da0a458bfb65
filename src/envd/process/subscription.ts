/** Queue limits a subscription reports against (see Broadcast). */
export interface QueueLimits {
  readonly highWater: number;
  readonly lowWater: number;
}

type Waiter<T> = { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void };

/**
 * One subscriber's queue, consumed as an async iterator. `return()` unsubscribes at once,
 * even while a `next()` is pending, so an abandoned stream releases its queue promptly.
 */
export class Subscription<T> implements AsyncIterableIterator<T> {
  private queue: (T | undefined)[] = [];
  private sizes: number[] = [];
  private head = 0;
  private bytes = 0;
  private waiter: Waiter<T> | undefined;
  private done = false;
  private error: unknown;
  private wasFull = false;

  constructor(
    private readonly limits: QueueLimits,
    private readonly detach: (s: Subscription<T>) => void,
    private readonly drained: () => void,
  ) {}

  /** Bytes queued and not yet taken. */
  get backlog(): number {
    return this.bytes;
  }

  /** True while the backlog is at or above the high-water mark (until it falls below the low one). */
  get full(): boolean {
    return this.wasFull;
  }

  /** Queues one item of `size` bytes (or hands it straight to a waiting reader); false once ended. */
  push(item: T, size: number): boolean {
    if (this.done) return false;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w.resolve({ value: item, done: false });
      return true;
    }
    this.queue.push(item);
    this.sizes.push(size);
    this.bytes += size;
    if (this.bytes >= this.limits.highWater) this.wasFull = true;
    return true;
  }

  /** Queues a last item (if given) and ends the iteration after it. */
  finish(final?: T): void {
    if (this.done) return;
    if (final !== undefined) this.push(final, 0);
    this.done = true;
    this.wake();
  }

  /** Drops everything queued and makes the next read throw `err`. */
  fail(err: unknown): void {
    if (this.done) return;
    this.clear();
    this.error = err;
    this.done = true;
    this.wake();
  }

  /** Takes the next item, waiting for one if the queue is empty. */
  next(): Promise<IteratorResult<T>> {
    if (this.head < this.queue.length) return Promise.resolve({ value: this.take(), done: false });
    if (this.error !== undefined) {
      const err = this.error;
      this.error = undefined;
      return Promise.reject(err);
    }
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  /** Unsubscribes and ends the iteration, releasing any pending `next()`. */
  return(): Promise<IteratorResult<T>> {
    this.clear();
    this.error = undefined;
    this.done = true;
    this.wake();
    this.detach(this);
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }

  private take(): T {
    const item = this.queue[this.head] as T;
    // Taken items must not stay reachable from the array until it is compacted: with
    // 256 KiB output events, 1024 of them held up to 256 MiB of delivered output.
    this.queue[this.head] = undefined;
    this.bytes -= this.sizes[this.head];
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.sizes = this.sizes.slice(this.head);
      this.head = 0;
    }
    if (this.wasFull && this.bytes < this.limits.lowWater) {
      this.wasFull = false;
      this.drained();
    }
    return item;
  }

  private clear(): void {
    this.queue = [];
    this.sizes = [];
    this.head = 0;
    this.bytes = 0;
    if (this.wasFull) {
      this.wasFull = false;
      this.drained();
    }
  }

  private wake(): void {
    const w = this.waiter;
    if (!w) return;
    this.waiter = undefined;
    if (this.head < this.queue.length) w.resolve({ value: this.take(), done: false });
    else if (this.error !== undefined) {
      const err = this.error;
      this.error = undefined;
      w.reject(err);
    } else w.resolve({ value: undefined, done: true });
  }
}

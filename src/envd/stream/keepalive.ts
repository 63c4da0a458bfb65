// Keep-alives of server streams: the period a client asks for (Keepalive-Ping-Interval) and the
// readers that put a keep-alive message into a stream's idle gaps. Transport-neutral: the process
// and filesystem streams use it whichever way their call arrived.
import { ConnectError } from "@connectrpc/connect";

/** Default keepalive period when the client sends none or nonsense (reference: 90 s). */
export const DEFAULT_KEEPALIVE_SECONDS = 90;

/** Parses `Keepalive-Ping-Interval` (seconds); missing, invalid, 0 or negative → 90 s. Returns ms. */
export function keepaliveIntervalMs(header: string | null | undefined): number {
  const n = header === null || header === undefined ? NaN : Number(header.trim());
  const seconds = Number.isInteger(n) && n > 0 ? Math.min(n, 86_400) : DEFAULT_KEEPALIVE_SECONDS;
  return seconds * 1000;
}

/** The clock and timer a keep-alive reader runs on: the process's own, or one a test moves by hand. */
export interface KeepaliveTimers {
  /** Milliseconds on a monotonic clock. */
  now(): number;
  /** Calls `fn` once, `ms` from now; returns a handle for clearTimeout. */
  setTimeout(fn: () => void, ms: number): unknown;
  /** Cancels a timer that has not fired (a spent or unknown handle is ignored). */
  clearTimeout(handle: unknown): void;
}

/** The real clock (performance.now) and Node's timers. */
export const realTimers: KeepaliveTimers = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** What `KeepaliveReader.read()` returns when a keep-alive is due instead of an item. */
export const TICK: unique symbol = Symbol("keepalive tick");

/**
 * Reads `source` one item at a time, reporting TICK whenever `intervalMs` passes with nothing
 * read while waiting on the source (the period restarts after every item the caller took).
 * For streams that loop over it inside their own generator, without a generator layer per
 * stage. Costs per item one `then` on the source's promise and one wait: the reader has a
 * single timer, re-armed lazily from the time of the last item, and a single abort listener.
 * Call `close()` when done (it closes the source without waiting).
 */
export class KeepaliveReader<T> {
  private readonly it: AsyncIterator<T>;
  private pending: Promise<IteratorResult<T>> | undefined;
  // The source's settled result; taken (and cleared) by read(), so no item outlives its turn.
  private settled: { ok: IteratorResult<T> } | { err: unknown } | undefined;
  private wake: (() => void) | undefined;
  private waiting = false;
  private tickDue = false;
  private lastSent: number;
  private timer: unknown;
  private readonly onAbort = (): void => this.wake?.();
  private readonly onValue = (r: IteratorResult<T>): void => {
    this.settled = { ok: r };
    this.wake?.();
  };
  private readonly onError = (e: unknown): void => {
    this.settled = { err: e };
    this.wake?.();
  };

  constructor(
    source: AsyncIterable<T>,
    private readonly intervalMs: number,
    private readonly signal: AbortSignal,
    private readonly timers: KeepaliveTimers = realTimers,
  ) {
    this.it = source[Symbol.asyncIterator]();
    this.lastSent = timers.now();
    this.timer = timers.setTimeout(this.onTimer, intervalMs);
    signal.addEventListener("abort", this.onAbort, { once: true });
  }

  /**
   * The next item, TICK when a keep-alive is due, or done when the source ended or the client
   * left (`signal` aborted). An abort whose reason is a ConnectError (shutdown, deadline) is
   * thrown, so the stream ends with it and the client reads why; so are source errors.
   */
  async read(): Promise<IteratorResult<T> | typeof TICK> {
    // The caller comes back for more once it sent the previous item: the period starts now.
    this.lastSent = this.timers.now();
    for (;;) {
      if (this.signal.aborted) {
        if (this.signal.reason instanceof ConnectError) throw this.signal.reason;
        return { value: undefined, done: true };
      }
      if (!this.pending) {
        this.pending = this.it.next();
        this.pending.then(this.onValue, this.onError);
      }
      if (!this.settled && !this.tickDue) {
        this.waiting = true;
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        this.waiting = false;
      }
      const s = this.settled;
      if (s) {
        this.settled = undefined;
        this.pending = undefined;
        if ("err" in s) throw s.err;
        this.tickDue = false;
        return s.ok;
      }
      if (this.tickDue) {
        this.tickDue = false;
        return TICK;
      }
    }
  }

  /** Stops the timer and the abort listener and closes the source (not awaited). */
  close(): void {
    this.timers.clearTimeout(this.timer);
    this.signal.removeEventListener("abort", this.onAbort);
    // Not awaited: an async generator's return() queues behind a pending next(), so a source
    // blocked on input must watch `signal` itself to release its resources promptly.
    this.it.return?.()?.catch(() => undefined);
  }

  private readonly onTimer = (): void => {
    const idle = this.timers.now() - this.lastSent;
    if (this.waiting && idle >= this.intervalMs - 1) {
      this.tickDue = true;
      this.wake?.();
      this.timer = this.timers.setTimeout(this.onTimer, this.intervalMs);
    } else {
      // Not waiting means the caller still holds the last item: count from when it comes back.
      this.timer = this.timers.setTimeout(this.onTimer, this.waiting ? this.intervalMs - idle : this.intervalMs);
    }
  };
}

/**
 * Yields everything `source` yields, plus `keepalive()` whenever `intervalMs` passes with
 * nothing sent while waiting on the source (the period restarts after every item). Ends when
 * the source ends or `signal` aborts; returning early closes the source (its `finally`
 * blocks run). See KeepaliveReader.
 */
export async function* withKeepalive<T>(
  source: AsyncIterable<T>,
  intervalMs: number,
  keepalive: () => T,
  signal: AbortSignal,
  timers: KeepaliveTimers = realTimers,
): AsyncGenerator<T> {
  const reader = new KeepaliveReader(source, intervalMs, signal, timers);
  try {
    for (;;) {
      const r = await reader.read();
      if (r === TICK) {
        yield keepalive();
        continue;
      }
      if (r.done) return;
      yield r.value;
    }
  } finally {
    reader.close();
  }
}

import { ConnectError } from "@connectrpc/connect";

/** Default keepalive period when the client sends none or nonsense (reference: 90 s). */
export const DEFAULT_KEEPALIVE_SECONDS = 90;

/** Parses `Keepalive-Ping-Interval` (seconds); missing, invalid, 0 or negative → 90 s. Returns ms. */
export function keepaliveIntervalMs(header: string | null | undefined): number {
  const n = header === null || header === undefined ? NaN : Number(header.trim());
  const seconds = Number.isInteger(n) && n > 0 ? Math.min(n, 86_400) : DEFAULT_KEEPALIVE_SECONDS;
  return seconds * 1000;
}

/**
 * Yields everything `source` yields, plus `keepalive()` whenever `intervalMs` passes with
 * nothing sent while waiting on the source (the period restarts after every item). Ends when
 * the source ends or `signal` aborts; returning early closes the source (its `finally`
 * blocks run).
 *
 * Costs per item only one `then` on the source's promise and one wait: the stream has a
 * single timer, re-armed lazily from the time of the last item, and a single abort listener.
 */
export async function* withKeepalive<T>(
  source: AsyncIterable<T>,
  intervalMs: number,
  keepalive: () => T,
  signal: AbortSignal,
): AsyncGenerator<T> {
  const it = source[Symbol.asyncIterator]();
  let pending: Promise<IteratorResult<T>> | undefined;
  // The source's settled result; taken (and cleared) by the loop, so no item outlives its turn.
  let settled: { ok: IteratorResult<T> } | { err: unknown } | undefined;
  let wake: (() => void) | undefined;
  let waiting = false;
  let tickDue = false;
  let lastSent = performance.now();
  const onTimer = (): void => {
    const idle = performance.now() - lastSent;
    if (waiting && idle >= intervalMs - 1) {
      tickDue = true;
      wake?.();
      timer = setTimeout(onTimer, intervalMs);
    } else {
      timer = setTimeout(onTimer, waiting ? intervalMs - idle : intervalMs);
    }
  };
  let timer = setTimeout(onTimer, intervalMs);
  const onAbort = (): void => wake?.();
  signal.addEventListener("abort", onAbort, { once: true });
  const onValue = (r: IteratorResult<T>): void => {
    settled = { ok: r };
    wake?.();
  };
  const onError = (e: unknown): void => {
    settled = { err: e };
    wake?.();
  };
  try {
    for (;;) {
      if (signal.aborted) {
        // A shutdown or deadline aborts with a ConnectError: end the stream with it, so the
        // client reads why; any other abort means the client left and nobody is listening.
        if (signal.reason instanceof ConnectError) throw signal.reason;
        return;
      }
      if (!pending) {
        pending = it.next();
        pending.then(onValue, onError);
      }
      if (!settled && !tickDue) {
        waiting = true;
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        waiting = false;
      }
      const s = settled;
      if (s) {
        settled = undefined;
        pending = undefined;
        if ("err" in s) throw s.err;
        if (s.ok.done) return;
        tickDue = false;
        lastSent = performance.now();
        yield s.ok.value;
        lastSent = performance.now();
        continue;
      }
      if (tickDue) {
        tickDue = false;
        lastSent = performance.now();
        yield keepalive();
        lastSent = performance.now();
      }
    }
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", onAbort);
    // Not awaited: an async generator's return() queues behind a pending next(), so a source
    // blocked on input must watch `signal` itself to release its resources promptly.
    it.return?.()?.catch(() => undefined);
  }
}

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
 * nothing sent (the timer restarts after every item). Ends when the source ends or `signal`
 * aborts; returning early closes the source (its `finally` blocks run).
 */
export async function* withKeepalive<T>(
  source: AsyncIterable<T>,
  intervalMs: number,
  keepalive: () => T,
  signal: AbortSignal,
): AsyncGenerator<T> {
  const it = source[Symbol.asyncIterator]();
  let pending: Promise<IteratorResult<T>> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<"abort">((resolve) => {
    onAbort = () => resolve("abort");
    if (signal.aborted) resolve("abort");
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    for (;;) {
      pending ??= it.next();
      const tick = new Promise<"tick">((resolve) => {
        timer = setTimeout(() => resolve("tick"), intervalMs);
      });
      const winner = await Promise.race([pending, tick, aborted]);
      clearTimeout(timer);
      // A shutdown or deadline aborts with a ConnectError: end the stream with it, so the
      // client reads why; any other abort means the client left and nobody is listening.
      if (winner === "abort") {
        if (signal.reason instanceof ConnectError) throw signal.reason;
        return;
      }
      if (winner === "tick") {
        yield keepalive();
        continue;
      }
      pending = undefined;
      if (winner.done) return;
      yield winner.value;
    }
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener("abort", onAbort);
    // Not awaited: an async generator's return() queues behind a pending next(), so a source
    // blocked on input must watch `signal` itself to release its resources promptly.
    it.return?.()?.catch(() => undefined);
  }
}

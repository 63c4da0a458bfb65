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
  try {
    for (;;) {
      if (signal.aborted) {
        // A shutdown or deadline aborts with a ConnectError: end the stream with it, so the
        // client reads why; any other abort means the client left and nobody is listening.
        if (signal.reason instanceof ConnectError) throw signal.reason;
        return;
      }
      const next = (pending ??= it.next());
      // One-shot race per item: a long-lived promise raced on every turn would keep a reaction
      // (holding each yielded item) alive for the whole stream, a leak as big as the stream.
      const winner = await new Promise<IteratorResult<T> | "tick" | "abort">((resolve, reject) => {
        const done = (): void => {
          clearTimeout(timer);
          signal.removeEventListener("abort", onAbort);
        };
        const onAbort = (): void => {
          done();
          resolve("abort");
        };
        const timer = setTimeout(() => {
          done();
          resolve("tick");
        }, intervalMs);
        signal.addEventListener("abort", onAbort, { once: true });
        next.then(
          (r) => {
            done();
            resolve(r);
          },
          (e: unknown) => {
            done();
            reject(e);
          },
        );
      });
      if (winner === "abort") continue;
      if (winner === "tick") {
        yield keepalive();
        continue;
      }
      pending = undefined;
      if (winner.done) return;
      yield winner.value;
    }
  } finally {
    // Not awaited: an async generator's return() queues behind a pending next(), so a source
    // blocked on input must watch `signal` itself to release its resources promptly.
    it.return?.()?.catch(() => undefined);
  }
}

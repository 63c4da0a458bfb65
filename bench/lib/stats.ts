/** Median of a non-empty list (mean of the middle two for even lengths). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The p-th percentile (0..100) by nearest rank. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

/** Milliseconds since an arbitrary origin, sub-millisecond resolution. */
export function now(): number {
  return performance.now();
}

/** Runs `fn` and returns how long it took in ms along with its result. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = now();
  const value = await fn();
  return { ms: now() - t0, value };
}

/**
 * Runs `a` and `b` alternately `n` times each (after `warmup` untimed rounds), so both sides
 * see the same machine conditions; returns the per-run durations in ms.
 */
export async function interleave(
  n: number,
  warmup: number,
  a: () => Promise<unknown>,
  b: () => Promise<unknown>,
): Promise<{ a: number[]; b: number[] }> {
  for (let i = 0; i < warmup; i++) {
    await a();
    await b();
  }
  const out = { a: [] as number[], b: [] as number[] };
  for (let i = 0; i < n; i++) {
    // Alternate which side goes first to cancel order effects (caches, CPU frequency).
    if (i % 2 === 0) {
      out.a.push((await timed(a)).ms);
      out.b.push((await timed(b)).ms);
    } else {
      out.b.push((await timed(b)).ms);
      out.a.push((await timed(a)).ms);
    }
  }
  return out;
}

/** Promise that resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** MiB/s for `bytes` moved in `ms`. */
export function mibps(bytes: number, ms: number): number {
  return bytes / (1024 * 1024) / (ms / 1000);
}

/** Bytes as MiB. */
export function mib(bytes: number): number {
  return bytes / (1024 * 1024);
}

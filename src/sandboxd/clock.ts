/**
 * Time as the sandbox lifecycle, its evictor and the warm pool read it: the real clock in
 * production; tests give one they advance by hand, so that timeouts and back-offs need no sleeps.
 */

/** Milliseconds since the epoch and timers on the same time line. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls `fn` once after `ms`; the returned function cancels it. */
  after(ms: number, fn: () => void): () => void;
  /** Calls `fn` every `ms` without keeping the process alive; the returned function stops it. */
  every(ms: number, fn: () => void): () => void;
}

/** The machine's clock and Node's timers. */
export const realClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
  every(ms, fn) {
    const t = setInterval(fn, ms);
    t.unref();
    return () => clearInterval(t);
  },
};

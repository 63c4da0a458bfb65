/**
 * A clock a test moves by hand: timers fire only inside advance(), in time order, so timeouts,
 * back-offs and refill waits are driven without sleeping.
 */
import type { Clock } from "../../../src/sandboxd/clock.js";

interface Timer {
  at: number;
  fn: () => void;
  every?: number;
  seq: number;
}

/** Lets every promise callback that is ready run (one turn of the event loop flushes them all). */
export async function settle(turns = 3): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((r) => setImmediate(r));
}

/**
 * Waits, turn by turn of the event loop (never by wall-clock time), until `cond` holds; fails
 * after `turns` turns so a broken expectation ends the test instead of hanging it.
 */
export async function until(cond: () => boolean, what = "the condition", turns = 10_000): Promise<void> {
  for (let i = 0; !cond(); i++) {
    if (i >= turns) throw new Error(`${what} did not come about`);
    await new Promise((r) => setImmediate(r));
  }
}

/** The clock: starts at the real time (so dates look real) and moves only when told. */
export class ManualClock implements Clock {
  private t = Date.now();
  private seq = 0;
  private timers = new Set<Timer>();

  now(): number {
    return this.t;
  }

  after(ms: number, fn: () => void): () => void {
    const timer: Timer = { at: this.t + Math.max(0, ms), fn, seq: this.seq++ };
    this.timers.add(timer);
    return () => void this.timers.delete(timer);
  }

  every(ms: number, fn: () => void): () => void {
    const timer: Timer = { at: this.t + ms, fn, every: Math.max(1, ms), seq: this.seq++ };
    this.timers.add(timer);
    return () => void this.timers.delete(timer);
  }

  /** Timers waiting to fire. */
  pending(): number {
    return this.timers.size;
  }

  /**
   * Moves time forward by `ms`, firing each timer that falls due on the way at its own time, and
   * letting the promise callbacks it starts run before the next one fires.
   */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      const next = [...this.timers].filter((x) => x.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next) break;
      this.t = Math.max(this.t, next.at);
      if (next.every) next.at += next.every;
      else this.timers.delete(next);
      next.fn();
      await settle();
    }
    this.t = end;
    await settle();
  }
}

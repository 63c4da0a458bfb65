import { Code, ConnectError } from "@connectrpc/connect";

/** How late the lifetime's own timer fires when the Start's deadline is to end the process first. */
const FALLBACK_LATE_MS = 1000;

/**
 * A process's Connect-Timeout-Ms lifetime. Given the Start's signal, whose own deadline is the
 * same lifetime, the process is ended from that signal's deadline abort: the stream then reads
 * the abort before the process's end and ends with deadline_exceeded. A timer of the process's
 * own, set in a later and busier turn of the loop, could fire first (timers count from the
 * turn's start), and the stream would end as if the process had simply exited. If the call ends
 * otherwise (its client left), the timer alone keeps the lifetime.
 */
export class Lifetime {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** Ends the process (its tree). */
    private readonly end: () => void,
    /** True once the process was reaped. */
    private readonly gone: () => boolean,
  ) {}

  /** Ends the process at `endsAt` (a performance.now() time) unless it exits first. */
  limit(endsAt: number, signal?: AbortSignal): void {
    const now = (): void => {
      this.clear();
      if (!this.gone()) this.end();
    };
    const arm = (lateMs: number): void => {
      this.clear();
      if (this.gone()) return;
      this.timer = setTimeout(now, Math.max(0, endsAt - performance.now()) + lateMs);
      this.timer.unref();
    };
    if (!signal || signal.aborted) return arm(0);
    // a fallback only: the signal's deadline comes first
    arm(FALLBACK_LATE_MS);
    signal.addEventListener("abort", () => {
      const r: unknown = signal.reason;
      if (r instanceof ConnectError && r.code === Code.DeadlineExceeded) now();
      else arm(0);
    }, { once: true });
  }

  /** Stops the timer (the process exited, or the daemon lets go of it). */
  clear(): void {
    clearTimeout(this.timer);
  }
}

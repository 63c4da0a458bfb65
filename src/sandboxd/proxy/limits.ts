/** Counts requests in flight per sandbox so one sandbox's clients cannot take every socket of the host. */
export class InFlight {
  private readonly counts = new Map<string, number>();

  constructor(private readonly max: number) {}

  /** Takes a slot for the sandbox; returns its release (idempotent), or undefined when the sandbox is at its bound. */
  acquire(sandboxID: string): (() => void) | undefined {
    const n = this.counts.get(sandboxID) ?? 0;
    if (n >= this.max) return undefined;
    this.counts.set(sandboxID, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.counts.get(sandboxID) ?? 1) - 1;
      if (left <= 0) this.counts.delete(sandboxID);
      else this.counts.set(sandboxID, left);
    };
  }

  /** Requests in flight to the sandbox now. */
  count(sandboxID: string): number {
    return this.counts.get(sandboxID) ?? 0;
  }
}

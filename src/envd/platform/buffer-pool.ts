// Reused buffers of one size for streaming (process output frames, read slabs).
/**
 * Free buffers of one size kept for reuse. Streaming hundreds of MiB/s through fresh buffers
 * makes V8 count them as external memory, which starts a full mark-compact every few tens of
 * MiB; reusing them costs nothing. At most `keep` are kept, and all are let go `idleMs` after
 * the last one came back, so an idle daemon holds none. A buffer never given back is simply collected.
 */
export class BufferPool {
  private readonly free: Buffer[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly size: number,
    private readonly keep: number,
    private readonly idleMs = 2000,
  ) {}

  /** A buffer of `size` bytes (contents undefined). */
  take(): Buffer {
    return this.free.pop() ?? Buffer.allocUnsafeSlow(this.size);
  }

  /** Returns a buffer taken from this pool; its holder must not touch it again. */
  give(buf: Buffer): void {
    if (this.free.length >= this.keep || buf.length !== this.size) return;
    this.free.push(buf);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.free.length = 0;
    }, this.idleMs).unref();
    this.timer.refresh();
  }

  /** Buffers free for reuse now. */
  get freeCount(): number {
    return this.free.length;
  }
}

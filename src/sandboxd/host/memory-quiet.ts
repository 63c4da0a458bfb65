/**
 * Giving memory back when sandboxd goes quiet. V8 keeps the heap it grew to under a burst of
 * creates (pages it reserved, a young generation grown to its maximum) and does not shrink it
 * by itself while the process idles; glibc keeps freed memory at the top of its heap. When the
 * event loop has been nearly idle for a whole period and the process grew since the last time,
 * one memory-reducing full collection (V8's "last resort": every space compacted, the young
 * generation shrunk, pooled pages unmapped) brings it back to what it really keeps.
 */
import { performance, type EventLoopUtilization } from "node:perf_hooks";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** V8's gc() with options, as --expose-gc gives it. */
type Gc = (options?: { type?: "major" | "minor"; execution?: "sync" | "async"; flavor?: "regular" | "last-resort" }) => void;

/** The quiet-time collector: how often it collected; stop() ends its timer. */
export interface QuietCollector {
  collections(): number;
  stop(): void;
}

/** When to collect. */
export interface QuietOptions {
  /** The period over which the event loop's utilisation is measured, ms. */
  periodMs?: number;
  /** Utilisation (0..1) below which a period counts as quiet. */
  quietBelow?: number;
  /** Growth of the RSS or of the reserved V8 heap since the last collection that makes one worth it, bytes. */
  growthBytes?: number;
  /** Told of each collection: the RSS before and after, bytes. */
  onCollect?: (before: number, after: number) => void;
}

/** gc() of this process: the global one under --expose-gc, else one exposed now. */
function gcFunction(): Gc {
  const g = (globalThis as { gc?: Gc }).gc;
  if (typeof g === "function") return g;
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as Gc;
}

/** Starts watching for quiet periods (the timer does not keep the process alive). */
export function startQuietCollector(opts: QuietOptions = {}): QuietCollector {
  const periodMs = opts.periodMs ?? 10_000;
  const quietBelow = opts.quietBelow ?? 0.02;
  const growth = opts.growthBytes ?? 8 * 2 ** 20;
  const gc = gcFunction();
  let count = 0;
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  // the level right after the last collection (at start: what the process has before any work)
  let rssAt = process.memoryUsage.rss();
  let heapAt = process.memoryUsage().heapTotal;
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const busy = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    if (busy >= quietBelow) return;
    const rss = process.memoryUsage.rss();
    if (rss < rssAt + growth && process.memoryUsage().heapTotal < heapAt + growth) return;
    gc({ type: "major", execution: "sync", flavor: "last-resort" });
    count++;
    rssAt = process.memoryUsage.rss();
    heapAt = process.memoryUsage().heapTotal;
    opts.onCollect?.(rss, rssAt);
    // the collection's own time is not counted against the next period
    last = performance.eventLoopUtilization();
  }, periodMs);
  timer.unref();
  return { collections: () => count, stop: () => clearInterval(timer) };
}

// Giving freed memory back to the system while envd is idle: when to trim (TrimPolicy) and the
// trim itself (V8 heap reduction, malloc_trim through the addon).
import { performance } from "node:perf_hooks";
import type { Logger } from "../../common/log.js";
import { addonExtra } from "./addon.js";
import { reduceHeap } from "./heap.js";

const MIB = 1024 * 1024;

/**
 * When to give freed memory back to the system: once on the first quiet tick after start (what
 * starting left behind: ~2 MiB of V8's heap, worth it on a host holding many idle daemons), then
 * after the event loop has been quiet for `quietTicks` ticks in a row, if RSS stands more than
 * `slackBytes` above the lowest RSS seen since the last trim. The floor follows RSS down (V8
 * shrinks its own heap when idle) and is reset after a trim, so memory that is really in use
 * never triggers a trim loop.
 */
export class TrimPolicy {
  private floor: number;
  private quiet = 0;
  private startPending = true;

  constructor(
    rss: number,
    private readonly slackBytes = 8 * MIB,
    private readonly quietTicks = 2,
    private readonly quietUtilization = 0.02,
  ) {
    this.floor = rss;
  }

  /** One tick: event-loop utilisation over the interval that just ended, and RSS now. True when a trim is due. */
  due(utilization: number, rss: number): boolean {
    this.floor = Math.min(this.floor, rss);
    this.quiet = utilization < this.quietUtilization ? this.quiet + 1 : 0;
    if (this.startPending && this.quiet > 0) return true;
    return this.quiet >= this.quietTicks && rss > this.floor + this.slackBytes;
  }

  /** Records the RSS measured right after a trim. */
  trimmed(rss: number): void {
    this.floor = rss;
    this.quiet = 0;
    this.startPending = false;
  }
}


/**
 * Checks once per `intervalMs` (an unref'd timer: it never keeps the daemon alive) whether a
 * burst of work has gone quiet with RSS well above its floor, and then gives memory back: V8's
 * heap through a memory-reducing collection (reduceHeap), then the C heap's free pages (glibc
 * keeps them mapped otherwise: tens of MiB after a few large transfers). The addon is loaded on
 * the first trim, not at start. `beforeFirstTrim` runs once, right before the first trim (what
 * the daemon will surely need is loaded while it is idle, and what that left is collected with
 * the rest). Returns a function that stops the checks.
 */
export function startMemoryTrimmer(log: Logger, intervalMs = 1000, beforeFirstTrim?: () => void): () => void {
  const policy = new TrimPolicy(process.memoryUsage.rss());
  let trim: (() => boolean) | undefined | null = null;
  let last = performance.eventLoopUtilization();
  const check = (): void => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, last);
    last = now;
    const before = process.memoryUsage.rss();
    if (!policy.due(utilization, before)) return;
    if (beforeFirstTrim) {
      const warm = beforeFirstTrim;
      beforeFirstTrim = undefined;
      warm();
    }
    const gcMs = reduceHeap();
    if (trim === null) trim = addonExtra("trimMalloc");
    trim?.();
    const after = process.memoryUsage.rss();
    policy.trimmed(after);
    log.debug({ rssMiB: Math.round(before / MIB), afterMiB: Math.round(after / MIB), gcMs: gcMs === undefined ? undefined : Math.round(gcMs) }, "released free memory");
  };
  let failing = false;
  const timer = setInterval(() => {
    try {
      check();
      failing = false;
    } catch (err) {
      // Reading RSS opens /proc/self/stat: with every descriptor taken (EMFILE) it fails, and
      // that must cost this check only; the next one runs when descriptors are free again.
      if (!failing) log.warn({ code: (err as NodeJS.ErrnoException).code }, "memory check failed");
      failing = true;
    }
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * sandboxd's live V8 heap: the heap in use read right after each full (mark-compact) collection,
 * which is what the process really keeps (the plain "heap in use" also counts garbage not yet
 * collected, and swings with the allocation rate).
 */
import { constants, PerformanceObserver, type PerformanceEntry } from "node:perf_hooks";

/** Watches full collections; `live()` is the heap in use after the last one (undefined before the first). */
export interface HeapWatch {
  live(): number | undefined;
  stop(): void;
}

/** Starts watching this process's garbage collections. */
export function watchHeap(): HeapWatch {
  let live: number | undefined;
  const observer = new PerformanceObserver((list) => {
    const full = list.getEntries().some((e) => (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR);
    if (full) live = process.memoryUsage().heapUsed;
  });
  observer.observe({ entryTypes: ["gc"] });
  return { live: () => live, stop: () => observer.disconnect() };
}

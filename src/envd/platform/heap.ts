// V8 heap reduction on demand: the last-resort collection memory.ts runs when envd goes quiet.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

type GcFn = (opts?: { type: "major" | "minor"; execution: "sync" | "async"; flavor?: "regular" | "last-resort" }) => void;

let gcFn: GcFn | null | undefined;

/**
 * Runs V8's most thorough collection (`flavor: "last-resort"`: repeated full, compacting GCs that
 * also shrink the young generation to its initial size and age out unused bytecode) and returns
 * its duration in ms, or undefined when this V8 offers no way to ask for it. A plain full GC does
 * not give back the young generation that streaming grew (16 MiB committed after a 64 MiB
 * transfer, measured on Node 24), and V8's own memory reducer did not run within 30 s of idling.
 * Synchronous: the event loop waits for it (40-90 ms on the 2-core VM after a burst of work).
 */
export function reduceHeap(): number | undefined {
  if (gcFn === undefined) {
    try {
      // The flag makes `gc` available to contexts created from now on; the daemon's own global
      // scope stays without it.
      setFlagsFromString("--expose-gc");
      gcFn = runInNewContext("gc") as GcFn;
    } catch {
      gcFn = null;
    }
  }
  if (!gcFn) return undefined;
  const t = performance.now();
  gcFn({ type: "major", execution: "sync", flavor: "last-resort" });
  return performance.now() - t;
}

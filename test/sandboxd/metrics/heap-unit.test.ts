import { test } from "node:test";
import assert from "node:assert/strict";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { watchHeap } from "../../../src/sandboxd/metrics/heap.js";

test("the live heap is read after a full collection, and not before the first", async () => {
  const watch = watchHeap();
  try {
    assert.equal(watch.live(), undefined);
    setFlagsFromString("--expose-gc");
    (runInNewContext("gc") as () => void)();
    // the observer is told of the collection on a later turn of the event loop
    while (watch.live() === undefined) await new Promise((r) => setImmediate(r));
    const live = watch.live()!;
    assert.ok(live > 0 && live <= process.memoryUsage().heapTotal, `${live} bytes`);
  } finally {
    watch.stop();
  }
});

import { test } from "node:test";
import assert from "node:assert/strict";
import { SPAWN_BUDGET_MS, spawnTurn } from "../../src/envd/process/spawn-turn.js";

function busyWait(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // a spawn blocking the loop until the child exec'd
  }
}

test("spawnTurn: every caller gets its turn, in order, and other I/O runs between the turns of a burst", async () => {
  const order: number[] = [];
  let otherWorkRanAt = -1;
  // Other requests' work, ready while the burst waits.
  setImmediate(() => setImmediate(() => (otherWorkRanAt = order.length)));
  const spawnMs = SPAWN_BUDGET_MS / 2 + 1;
  await Promise.all(
    Array.from({ length: 20 }, async (_, i) => {
      await spawnTurn();
      busyWait(spawnMs);
      order.push(i);
    }),
  );
  assert.deepEqual(order, Array.from({ length: 20 }, (_, i) => i));
  assert.ok(otherWorkRanAt > 0 && otherWorkRanAt < 20, `other work ran after ${otherWorkRanAt} of 20 spawns`);
});

test("spawnTurn: a lone caller waits no more than one turn", async () => {
  // Turns of the loop are counted by check phases: a chain of setImmediate callbacks.
  let turns = 0;
  let granted = false;
  const count = () => {
    if (granted) return;
    turns++;
    setImmediate(count);
  };
  setImmediate(count);
  await spawnTurn();
  granted = true;
  assert.ok(turns <= 1, `granted after ${turns} turns of the loop`);
  // and the gate re-arms for later callers
  await spawnTurn();
});

test("spawnTurn: after a quiet spell the first caller goes without waiting for a turn", async () => {
  await new Promise((r) => setTimeout(r, SPAWN_BUDGET_MS + 5));
  // A loaded machine can fire the timer before the check phase that closes the last test's turn.
  await new Promise((r) => setImmediate(r));
  let immediateRan = false;
  setImmediate(() => (immediateRan = true));
  await spawnTurn();
  assert.equal(immediateRan, false, "granted before the loop's next check phase");
});

test("spawnTurn: a caller in a later turn of the loop goes at once, however soon after the last spawn", async () => {
  await spawnTurn();
  busyWait(1);
  // The loop's check phase closes the turn; well within the budget's time, a new caller comes.
  await new Promise((r) => setImmediate(r));
  let immediateRan = false;
  setImmediate(() => (immediateRan = true));
  await spawnTurn();
  assert.equal(immediateRan, false, "granted before the loop's next check phase");
});

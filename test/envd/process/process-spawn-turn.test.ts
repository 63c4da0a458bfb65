// The spawn gate (src/envd/process/spawn-turn.ts) on a clock the test moves by hand: a spawn that
// blocks the loop for some milliseconds is the clock moving that much while the caller runs, so
// the budget is spent exactly, and turns of the loop are counted by check phases.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SPAWN_BUDGET_MS, SpawnGate, spawnTurn } from "../../../src/envd/process/spawn-turn.js";

/** A gate on a hand-moved clock; `spend(ms)` is a spawn that held the loop for `ms`. */
function manualGate() {
  let t = 1_000;
  return {
    gate: new SpawnGate(() => t),
    spend(ms: number) {
      t += ms;
    },
  };
}

const checkPhase = () => new Promise<void>((r) => setImmediate(r));

test("spawnTurn: every caller gets its turn, in order, and other I/O runs between the turns of a burst", async () => {
  const { gate, spend } = manualGate();
  const order: number[] = [];
  let otherWorkRanAt = -1;
  // Other requests' work, ready while the burst waits.
  setImmediate(() => setImmediate(() => (otherWorkRanAt = order.length)));
  const spawnMs = SPAWN_BUDGET_MS / 2 + 1;
  await Promise.all(
    Array.from({ length: 20 }, async (_, i) => {
      await gate.turn();
      spend(spawnMs);
      order.push(i);
    }),
  );
  assert.deepEqual(order, Array.from({ length: 20 }, (_, i) => i));
  assert.ok(otherWorkRanAt > 0 && otherWorkRanAt < 20, `other work ran after ${otherWorkRanAt} of 20 spawns`);
});

test("spawnTurn: a turn grants spawns only until its budget is used", async () => {
  const { gate, spend } = manualGate();
  const turnOf: number[] = [];
  let turn = 0;
  let counting = true;
  const count = () => {
    if (!counting) return;
    turn++;
    setImmediate(count);
  };
  setImmediate(count);
  await Promise.all(
    Array.from({ length: 9 }, async () => {
      await gate.turn();
      turnOf.push(turn);
      spend(SPAWN_BUDGET_MS / 2 + 1);
    }),
  );
  counting = false;
  // Each spawn uses more than half the budget: two per turn of the loop.
  const perTurn = new Map<number, number>();
  for (const t of turnOf) perTurn.set(t, (perTurn.get(t) ?? 0) + 1);
  assert.deepEqual([...perTurn.values()], [2, 2, 2, 2, 1], `spawns per turn: ${JSON.stringify([...perTurn])}`);
});

test("spawnTurn: a lone caller waits no more than one turn", async () => {
  const { gate } = manualGate();
  // Turns of the loop are counted by check phases: a chain of setImmediate callbacks.
  let turns = 0;
  let granted = false;
  const count = () => {
    if (granted) return;
    turns++;
    setImmediate(count);
  };
  setImmediate(count);
  await gate.turn();
  granted = true;
  assert.ok(turns <= 1, `granted after ${turns} turns of the loop`);
  // and the gate re-arms for later callers
  await gate.turn();
});

test("spawnTurn: after a quiet spell the first caller goes without waiting for a turn", async () => {
  const { gate, spend } = manualGate();
  await gate.turn();
  spend(SPAWN_BUDGET_MS);
  // The loop's check phase closes that turn; time passes with nothing to spawn.
  await checkPhase();
  spend(SPAWN_BUDGET_MS + 5);
  let immediateRan = false;
  setImmediate(() => (immediateRan = true));
  await gate.turn();
  assert.equal(immediateRan, false, "granted before the loop's next check phase");
});

test("spawnTurn: a caller in a later turn of the loop goes at once, however soon after the last spawn", async () => {
  const { gate, spend } = manualGate();
  await gate.turn();
  spend(1);
  // The loop's check phase closes the turn; well within the budget's time, a new caller comes.
  await checkPhase();
  let immediateRan = false;
  setImmediate(() => (immediateRan = true));
  await gate.turn();
  assert.equal(immediateRan, false, "granted before the loop's next check phase");
});

test("spawnTurn: the daemon's gate lets a lone caller spawn", async () => {
  await spawnTurn();
  await spawnTurn();
});

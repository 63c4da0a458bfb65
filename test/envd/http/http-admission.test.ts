import { test } from "node:test";
import assert from "node:assert/strict";
import { createAdmission } from "../../../src/envd/http/admission.js";

function busyWait(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // a request's preparation holding the event loop
  }
}

const nextTurn = () => new Promise((r) => setImmediate(r));

test("admission: a lone request runs at once, before admit returns", async () => {
  await nextTurn();
  const admit = createAdmission(4);
  let ran = false;
  admit(() => (ran = true));
  assert.equal(ran, true);
});

test("admission: a burst runs in arrival order, a budget per turn, with other I/O between its turns", async () => {
  await nextTurn();
  const budget = 4;
  const admit = createAdmission(budget);
  const order: number[] = [];
  // Turns of the loop in which admitted work ran, and when other I/O got its turn.
  const turnOf: number[] = [];
  let turn = 0;
  const ticker = setInterval(() => turn++, 0);
  let otherIoAt = -1;
  setImmediate(() => setImmediate(() => (otherIoAt = order.length)));
  const done = new Promise<void>((resolve) => {
    for (let i = 0; i < 30; i++)
      admit(() => {
        busyWait(1);
        order.push(i);
        turnOf.push(turn);
        if (order.length === 30) resolve();
      });
  });
  // Arrivals while the burst waits go behind it.
  admit(() => order.push(100));
  await done;
  await nextTurn();
  clearInterval(ticker);
  assert.deepEqual(order, [...Array.from({ length: 30 }, (_, i) => i), 100]);
  assert.ok(otherIoAt > 0 && otherIoAt < 30, `other I/O ran after ${otherIoAt} of 30`);
  // No turn ran much more than a budget's worth (1 ms each): the first turn takes requests
  // until the budget has passed, each later turn likewise.
  const perTurn = new Map<number, number>();
  for (const t of turnOf) perTurn.set(t, (perTurn.get(t) ?? 0) + 1);
  assert.ok(perTurn.size >= 30 / (budget + 1), `30 requests ran in ${perTurn.size} turns`);
  for (const [t, n] of perTurn) assert.ok(n <= budget + 1, `turn ${t} ran ${n} requests`);
});

test("admission: after a burst drains, a lone request runs at once again", async () => {
  await nextTurn();
  const admit = createAdmission(2);
  await new Promise<void>((resolve) => {
    let left = 10;
    for (let i = 0; i < 10; i++)
      admit(() => {
        busyWait(1);
        if (--left === 0) resolve();
      });
  });
  await nextTurn();
  await nextTurn();
  let ran = false;
  admit(() => (ran = true));
  assert.equal(ran, true);
});

test("admission: a request arriving at the start of a turn still waits behind the queue", async () => {
  await nextTurn();
  const admit = createAdmission(2);
  const order: string[] = [];
  await new Promise<void>((resolve) => {
    for (let i = 0; i < 10; i++)
      admit(() => {
        busyWait(1);
        order.push(String(i));
        // Lands in the next turn's check phase, after the budget of the turn has been reset
        // and before the queue's next share runs.
        if (i === 3) setImmediate(() => admit(() => order.push("late")));
        if (order.length === 11) resolve();
      });
    admit(() => {
      order.push("last");
    });
    const wait = () => (order.includes("late") && order.includes("last") ? resolve() : setImmediate(wait));
    wait();
  });
  assert.deepEqual(order, ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "last", "late"]);
});

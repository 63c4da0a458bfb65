// Keep-alives of server streams (src/envd/stream/keepalive.ts) on a clock the test moves by hand:
// the sources are paced by it and the reader's timer runs on it, so every gap and period is exact
// and no test waits for wall-clock time.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { withKeepalive, type KeepaliveTimers } from "../../../src/envd/stream/keepalive.js";

/** Lets every promise chain that can move on do so (no I/O is involved: one turn of the loop). */
const settle = () => new Promise<void>((r) => setImmediate(r));

/** A clock that stands still until `advance`, which fires due timers in time order. */
class ManualClock implements KeepaliveTimers {
  private t = 0;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.t;
  }

  setTimeout(fn: () => void, ms: number): number {
    this.timers.set(++this.seq, { at: this.t + ms, fn });
    return this.seq;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Resolves once the clock has moved `ms` on. */
  sleep(ms: number): Promise<void> {
    return new Promise((r) => this.setTimeout(r, ms));
  }

  /** Timers not yet fired or cleared. */
  get pending(): number {
    return this.timers.size;
  }

  /** Moves the clock `ms` on, firing each timer at its time and letting its effects settle. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      await settle();
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.timers) if (entry[1].at <= end && (!next || entry[1].at < next[1].at)) next = entry;
      if (!next) break;
      this.timers.delete(next[0]);
      this.t = next[1].at;
      next[1].fn();
    }
    this.t = end;
    await settle();
  }
}

/** A source yielding `items` with `gapMs` of the clock before each; records whether its finally ran. */
function paced<T>(clock: ManualClock, items: T[], gapMs: number) {
  const state = { closed: false };
  const gen = (async function* () {
    try {
      for (const x of items) {
        await clock.sleep(gapMs);
        yield x;
      }
    } finally {
      state.closed = true;
    }
  })();
  return { gen, state };
}

/** Collects a stream in the background; `done` tells whether it has ended. */
function collect<T>(stream: AsyncIterable<T>) {
  const out: T[] = [];
  let done = false;
  const ended = (async () => {
    try {
      for await (const x of stream) out.push(x);
    } finally {
      done = true;
    }
  })();
  return { out, ended, isDone: () => done };
}

/** Advances the clock in `stepMs` steps until the collected stream ends. */
async function runOut(clock: ManualClock, c: { ended: Promise<void>; isDone(): boolean }, stepMs: number): Promise<void> {
  while (!c.isDone()) await clock.advance(stepMs);
  await c.ended;
}

test("withKeepalive: keep-alives fill idle gaps, none while items flow faster than the interval", async () => {
  const clock = new ManualClock();
  const fast = paced(clock, [1, 2, 3, 4, 5, 6], 20);
  const a = collect(withKeepalive<number | "k">(fast.gen, 100, () => "k", new AbortController().signal, clock));
  await runOut(clock, a, 10);
  assert.deepEqual(a.out, [1, 2, 3, 4, 5, 6]);

  // Gaps of 250 at a period of 100: keep-alives at 100 and 200, then (counted from the item at
  // 250) at 350 and 450, then the second item at 500.
  const slow = paced(clock, [1, 2], 250);
  const b = collect(withKeepalive<number | "k">(slow.gen, 100, () => "k", new AbortController().signal, clock));
  await runOut(clock, b, 10);
  assert.deepEqual(b.out, ["k", "k", 1, "k", "k", 2]);
  assert.equal(clock.pending, 0, "no timer left once the streams ended");
});

test("withKeepalive: the period restarts after every item", async () => {
  const clock = new ManualClock();
  const src = paced(clock, [1, 2, 3, 4, 5], 60);
  const c = collect(withKeepalive<number | "k">(src.gen, 100, () => "k", new AbortController().signal, clock));
  await runOut(clock, c, 10);
  assert.deepEqual(c.out, [1, 2, 3, 4, 5], "60 ms gaps never reach a 100 ms keep-alive period");
});

test("withKeepalive: a client abort ends the stream quietly and at once, and closes the source", async () => {
  const clock = new ManualClock();
  const src = paced(clock, [1, 2, 3], 5_000);
  const ac = new AbortController();
  const c = collect(withKeepalive(src.gen, 10_000, () => 0, ac.signal, clock));
  await settle();
  assert.equal(c.isDone(), false, "the stream waits on its source");
  ac.abort();
  await c.ended;
  assert.deepEqual(c.out, []);
  assert.equal(clock.now(), 0, "ended without any time passing");
  // The source's pending read settles when its own wait does; then its finally runs.
  await clock.advance(5_000);
  assert.equal(src.state.closed, true, "the source was closed");
  assert.equal(clock.pending, 0, "the keep-alive timer was cleared");
});

test("withKeepalive: an abort with a ConnectError ends the stream with that error", async () => {
  const clock = new ManualClock();
  const src = paced(clock, [1], 5_000);
  const ac = new AbortController();
  const c = collect(withKeepalive(src.gen, 10_000, () => 0, ac.signal, clock));
  c.ended.catch(() => undefined);
  await settle();
  ac.abort(new ConnectError("deadline", Code.DeadlineExceeded));
  await assert.rejects(c.ended, (e: unknown) => e instanceof ConnectError && e.code === Code.DeadlineExceeded);
});

test("withKeepalive: source errors propagate; an early return closes the source", async () => {
  const clock = new ManualClock();
  const failing = (async function* () {
    yield 1;
    throw new Error("boom");
  })();
  const got: number[] = [];
  await assert.rejects(
    (async () => {
      for await (const x of withKeepalive(failing, 10_000, () => 0, new AbortController().signal, clock)) got.push(x);
    })(),
    /boom/,
  );
  assert.deepEqual(got, [1]);

  const src = paced(clock, [1, 2, 3], 5);
  const c = collect(
    (async function* () {
      for await (const x of withKeepalive(src.gen, 10_000, () => 0, new AbortController().signal, clock)) {
        yield x;
        if (x === 1) break;
      }
    })(),
  );
  await runOut(clock, c, 5);
  assert.deepEqual(c.out, [1]);
  await settle();
  assert.equal(src.state.closed, true, "breaking out of the stream ran the source's finally");
  assert.equal(clock.pending, 0, "no timer left behind");
});

test("withKeepalive: many items through one stream keep no timers or listeners behind", async () => {
  const clock = new ManualClock();
  const n = 20_000;
  const src = (async function* () {
    for (let i = 0; i < n; i++) yield i;
  })();
  const ac = new AbortController();
  let count = 0;
  for await (const _ of withKeepalive(src, 60_000, () => -1, ac.signal, clock)) count++;
  assert.equal(count, n);
  assert.equal(clock.pending, 0, "the keep-alive timer was cleared");
  // Node keeps abort listeners in an internal symbol-keyed map; after the stream none is left.
  const kEvents = Object.getOwnPropertySymbols(ac.signal).find((s) => s.description === "kEvents");
  const events = kEvents ? (ac.signal as unknown as Record<symbol, Map<string, unknown>>)[kEvents] : undefined;
  if (events) assert.equal(events.has("abort"), false, "abort listener removed");
});

import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { withKeepalive } from "../../src/envd/stream/keepalive.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A source yielding `items` with `gapMs` between them; records whether its finally ran. */
function paced<T>(items: T[], gapMs: number) {
  const state = { closed: false };
  const gen = (async function* () {
    try {
      for (const x of items) {
        await sleep(gapMs);
        yield x;
      }
    } finally {
      state.closed = true;
    }
  })();
  return { gen, state };
}

test("withKeepalive: keep-alives fill idle gaps, none while items flow faster than the interval", async () => {
  const fast = paced([1, 2, 3, 4, 5, 6], 20);
  const out: (number | "k")[] = [];
  for await (const x of withKeepalive<number | "k">(fast.gen, 100, () => "k", new AbortController().signal)) out.push(x);
  assert.deepEqual(out, [1, 2, 3, 4, 5, 6]);

  const slow = paced([1, 2], 250);
  const out2: (number | "k")[] = [];
  for await (const x of withKeepalive<number | "k">(slow.gen, 100, () => "k", new AbortController().signal)) out2.push(x);
  assert.equal(out2.filter((x) => x !== "k").join(","), "1,2");
  const ks = out2.filter((x) => x === "k").length;
  assert.ok(ks >= 2 && ks <= 5, `expected 2..5 keep-alives in two 250 ms gaps at 100 ms, got ${ks}: ${out2.join(",")}`);
  assert.equal(out2[0], "k", "the first gap starts with a keep-alive");
});

test("withKeepalive: the period restarts after every item", async () => {
  const src = paced([1, 2, 3, 4, 5], 60);
  const out: (number | "k")[] = [];
  for await (const x of withKeepalive<number | "k">(src.gen, 100, () => "k", new AbortController().signal)) out.push(x);
  assert.deepEqual(out, [1, 2, 3, 4, 5], "60 ms gaps never reach a 100 ms keep-alive period");
});

test("withKeepalive: a client abort ends the stream quietly and closes the source", async () => {
  const src = paced([1, 2, 3], 5_000);
  const ac = new AbortController();
  const out: unknown[] = [];
  setTimeout(() => ac.abort(), 50);
  const t0 = Date.now();
  for await (const x of withKeepalive(src.gen, 10_000, () => 0, ac.signal)) out.push(x);
  assert.deepEqual(out, []);
  assert.ok(Date.now() - t0 < 2_000, "ended promptly");
});

test("withKeepalive: an abort with a ConnectError ends the stream with that error", async () => {
  const src = paced([1], 5_000);
  const ac = new AbortController();
  setTimeout(() => ac.abort(new ConnectError("deadline", Code.DeadlineExceeded)), 30);
  await assert.rejects(
    (async () => {
      for await (const _ of withKeepalive(src.gen, 10_000, () => 0, ac.signal)) void _;
    })(),
    (e: unknown) => e instanceof ConnectError && e.code === Code.DeadlineExceeded,
  );
});

test("withKeepalive: source errors propagate; an early return closes the source", async () => {
  const failing = (async function* () {
    yield 1;
    throw new Error("boom");
  })();
  const got: number[] = [];
  await assert.rejects(
    (async () => {
      for await (const x of withKeepalive(failing, 10_000, () => 0, new AbortController().signal)) got.push(x);
    })(),
    /boom/,
  );
  assert.deepEqual(got, [1]);

  const src = paced([1, 2, 3], 5);
  for await (const x of withKeepalive(src.gen, 10_000, () => 0, new AbortController().signal)) if (x === 1) break;
  await sleep(20);
  assert.equal(src.state.closed, true, "breaking out of the stream ran the source's finally");
});

test("withKeepalive: many items through one stream keep no timers or listeners behind", async () => {
  const n = 20_000;
  const src = (async function* () {
    for (let i = 0; i < n; i++) yield i;
  })();
  const ac = new AbortController();
  let count = 0;
  for await (const _ of withKeepalive(src, 60_000, () => -1, ac.signal)) count++;
  assert.equal(count, n);
  // Node keeps abort listeners in an internal symbol-keyed map; after the stream none is left.
  const kEvents = Object.getOwnPropertySymbols(ac.signal).find((s) => s.description === "kEvents");
  const events = kEvents ? (ac.signal as unknown as Record<symbol, Map<string, unknown>>)[kEvents] : undefined;
  if (events) assert.equal(events.has("abort"), false, "abort listener removed");
});

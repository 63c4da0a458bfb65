import { test } from "node:test";
import assert from "node:assert/strict";
import { EnvdHeaders } from "../../../src/envd/http/headers.js";

/** Everything observable of a Headers object, or the kind of error an operation threw. */
function observe(h: Headers | EnvdHeaders, names: string[]): unknown {
  const seen: [string, string][] = [];
  h.forEach((v, k) => seen.push([k, v]));
  const got = names.map((n) => {
    try {
      return [h.get(n), h.has(n)];
    } catch (err) {
      return (err as Error).name;
    }
  });
  return { entries: [...h], keys: [...h.keys()], values: [...h.values()], seen, got, cookies: h.getSetCookie(), tag: Object.prototype.toString.call(h) };
}

function attempt(run: () => void): string {
  try {
    run();
    return "ok";
  } catch (err) {
    return (err as Error).name;
  }
}

/** A small deterministic generator, so a failure can be replayed. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

const NAMES = ["Content-Type", "content-type", "X-A", "x-a", "Set-Cookie", "set-cookie", "Grpc-Status", "connect-timeout-ms", "a", "Z", "bad name", "", "x:y", "ü", "trailer-x", "B-bin"];
const VALUES = ["v", " padded\t", "a, b", "", "\t", "with\nnewline", "nul\0", "x\r", "é latin1", "k=v; Path=/", "  ", "1"];

test("EnvdHeaders behaves as Node's (undici's) Headers under random appends, sets and deletes", () => {
  for (let seed = 1; seed <= 300; seed++) {
    const r = rng(seed);
    const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)];
    const init: [string, string][] = Array.from({ length: Math.floor(r() * 4) }, () => [pick(NAMES.slice(0, 10)), pick(VALUES.slice(0, 4))]);
    const ours = new EnvdHeaders(init);
    const theirs = new Headers(init);
    const log: string[] = [];
    for (let i = 0; i < 12; i++) {
      const op = Math.floor(r() * 3);
      const name = pick(NAMES);
      const value = pick(VALUES);
      const a = attempt(() => (op === 0 ? ours.append(name, value) : op === 1 ? ours.set(name, value) : ours.delete(name)));
      const b = attempt(() => (op === 0 ? theirs.append(name, value) : op === 1 ? theirs.set(name, value) : theirs.delete(name)));
      log.push(`${["append", "set", "delete"][op]}(${JSON.stringify(name)}, ${JSON.stringify(value)})`);
      assert.equal(a, b, `seed ${seed}: ${log.join("; ")}`);
      assert.deepEqual(observe(ours, NAMES), observe(theirs, NAMES), `seed ${seed}: ${log.join("; ")}`);
    }
    assert.deepEqual(observe(new EnvdHeaders(ours), NAMES), observe(new Headers(theirs), NAMES), `seed ${seed}: copy`);
  }
});

test("EnvdHeaders takes the same inits as Headers and refuses the same bad ones", () => {
  const inits: unknown[] = [undefined, {}, { A: "1", b: " 2 " }, [["a", "1"], ["A", "2"]], new Map([["x", "y"]]), [["only-one"]], [["a", "1", "2"]], ["ab"], 5, "a", { "bad name": "x" }, { a: "x\ny" }];
  for (const init of inits) {
    let ours: EnvdHeaders | string;
    let theirs: Headers | string;
    try {
      ours = new EnvdHeaders(init as HeadersInit);
    } catch (err) {
      ours = (err as Error).name;
    }
    try {
      theirs = new Headers(init as HeadersInit);
    } catch (err) {
      theirs = (err as Error).name;
    }
    if (typeof ours === "string" || typeof theirs === "string") assert.equal(ours, theirs, `init ${String(JSON.stringify(init))}`);
    else assert.deepEqual(observe(ours, ["a", "b", "x"]), observe(theirs, ["a", "b", "x"]), `init ${String(JSON.stringify(init))}`);
  }
});

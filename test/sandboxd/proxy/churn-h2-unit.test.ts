import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { ClientHttp2Session } from "node:http2";
import { DEFAULT_LIMITS } from "../../../src/sandboxd/proxy/dial.js";
import { H2cPool } from "../../../src/sandboxd/proxy/http2.js";
import { startH2cTarget } from "../helpers/targets.js";

/** A full garbage collection, after the callbacks queued by a close have run. */
async function collect(): Promise<void> {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  for (let i = 0; i < 3; i++) {
    await new Promise((r) => setImmediate(r));
    gc();
  }
}

/** One request over the pool's session to the sandbox, read to its end. */
async function get(pool: H2cPool, sandboxID: string, port: number): Promise<ClientHttp2Session> {
  const session = pool.session({ sandboxID, ip: "127.0.0.1", port });
  const req = session.request({ ":path": "/seen" });
  req.resume();
  req.end();
  await once(req, "end");
  return session;
}

/** One sandbox's round: two requests share a session, then a sweep closes it as the sandbox is gone; a weak reference to it. */
async function sweptRound(pool: H2cPool, sandboxID: string, port: number): Promise<WeakRef<ClientHttp2Session>> {
  const session = await get(pool, sandboxID, port);
  assert.equal(await get(pool, sandboxID, port), session, "a sandbox's requests share its session");
  assert.equal(pool.size(), 2);
  const closed = once(session, "close");
  pool.sweep((id) => id === "isbxlive");
  await closed;
  return new WeakRef(session);
}

describe("the proxy's h2c sessions of killed sandboxes are not held after they close", () => {
  let h2c: Awaited<ReturnType<typeof startH2cTarget>>;
  before(async () => {
    h2c = await startH2cTarget();
  });
  after(() => h2c.server.close());

  test("rounds of sessions swept as their sandboxes go: none stays reachable, and the pool holds only the live one", async () => {
    const pool = new H2cPool(DEFAULT_LIMITS);
    const refs: WeakRef<ClientHttp2Session>[] = [];
    await get(pool, "isbxlive", h2c.port);
    for (let round = 0; round < 10; round++) refs.push(await sweptRound(pool, `isbxgone${round}`, h2c.port));
    assert.equal(pool.size(), 1, "only the live sandbox's session is pooled");
    await collect();
    assert.equal(refs.filter((r) => r.deref() !== undefined).length, 0, "closed sessions still reachable (an idle timer armed on them holds them)");
    pool.close();
  });
});

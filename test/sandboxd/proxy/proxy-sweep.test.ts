import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Socket } from "node:net";
import { once } from "node:events";
import { DOMAIN, startFront, target, type Front } from "../helpers/proxy-front.js";
import { startHttp1Target, startH2cTarget } from "../helpers/targets.js";

/** The sockets a target server holds open now. */
function openSockets(server: { on(e: "connection", fn: (s: Socket) => void): unknown }): Set<Socket> {
  const open = new Set<Socket>();
  server.on("connection", (s: Socket) => {
    open.add(s);
    s.on("close", () => open.delete(s));
  });
  return open;
}

describe("the proxy's upstream pools forget a sandbox the index no longer routes", () => {
  let front: Front;
  let h1: Awaited<ReturnType<typeof startHttp1Target>>;
  let h2c: Awaited<ReturnType<typeof startH2cTarget>>;
  let h1Open: Set<Socket>;
  let h2Open: Set<Socket>;

  before(async () => {
    h1 = await startHttp1Target();
    h2c = await startH2cTarget();
    h1Open = openSockets(h1.server);
    h2Open = openSockets(h2c.server);
    front = await startFront();
  });
  after(async () => {
    await front.close();
    h1.server.close();
    h2c.server.close();
  });

  test("a sweep closes a killed sandbox's kept-alive HTTP/1.1 connections and h2c session, and keeps a live one's", async () => {
    front.targets.set("isbxgone", target("isbxgone", h2c.port));
    front.targets.set("isbxlive", target("isbxlive", h2c.port));
    const host = (port: number, id: string) => `${port}-${id}.${DOMAIN}:${front.port}`;
    for (const id of ["isbxgone", "isbxlive"]) {
      assert.equal((await front.h1(host(h1.port, id), "/seen")).status, 200);
      const s = front.h2session();
      assert.equal((await front.h2(s, host(h2c.port, id), "/seen")).status, 200);
      s.close();
    }
    assert.equal(h1Open.size, 2, "one pooled HTTP/1.1 connection per sandbox");
    assert.equal(h2Open.size, 2, "one h2c session per sandbox");
    const gone = { h1: [...h1Open][0], h2: [...h2Open][0] };
    front.targets.delete("isbxgone");
    const closed = Promise.all([once(gone.h1, "close"), once(gone.h2, "close")]);
    front.proxy.sweep();
    await closed;
    assert.equal(h1Open.size, 1, "the live sandbox keeps its connection");
    assert.equal(h2Open.size, 1, "the live sandbox keeps its session");
    const s = front.h2session();
    assert.equal((await front.h2(s, host(h2c.port, "isbxlive"), "/seen")).status, 200);
    s.close();
    assert.equal(h2Open.size, 1, "and reuses it");
  });
});

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

/** Sandboxes the test says are paused: not routed, but not gone. */
const paused = new Set<string>();

describe("the proxy forgets a sandbox the index no longer routes: its upstream pools and its clients' connections", () => {
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
    front = await startFront({ exists: (id) => paused.has(id) || front.targets.has(id) });
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

  test("a sweep closes the client connections (HTTP/2 with GOAWAY, HTTP/1.1 kept-alive) that carried only a killed sandbox's traffic", async () => {
    const host = (port: number, id: string) => `${port}-${id}.${DOMAIN}:${front.port}`;
    front.targets.set("isbxold", target("isbxold", h2c.port));
    front.targets.set("isbxnew", target("isbxnew", h2c.port));
    const gone = front.h2session();
    const live = front.h2session();
    const both = front.h2session();
    assert.equal((await front.h2(gone, host(h2c.port, "isbxold"), "/seen")).status, 200);
    assert.equal((await front.h2(live, host(h2c.port, "isbxnew"), "/seen")).status, 200);
    for (const id of ["isbxold", "isbxnew"]) assert.equal((await front.h2(both, host(h2c.port, id), "/seen")).status, 200);
    // an HTTP/1.1 client keeping its connection to the killed sandbox's host
    const { Agent, request } = await import("node:https");
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const h1Socket = await new Promise<Socket>((resolve, reject) => {
      const req = request(front.options(host(h1.port, "isbxold"), "/seen", { agent }), (res) => {
        res.resume();
        res.on("end", () => resolve(req.socket!));
      });
      req.on("error", reject);
      req.end();
    });
    assert.deepEqual(front.proxy.clients(), { sandboxes: 2, connections: 4 });
    front.targets.delete("isbxold");
    const closed = Promise.all([once(gone, "close"), once(h1Socket, "close")]);
    front.proxy.sweep();
    await closed;
    assert.equal(live.closed || live.destroyed, false, "a connection of a live sandbox stays");
    assert.equal(both.closed || both.destroyed, false, "a connection that also carries a live sandbox stays");
    assert.deepEqual(front.proxy.clients(), { sandboxes: 1, connections: 2 });
    assert.equal((await front.h2(both, host(h2c.port, "isbxnew"), "/seen")).status, 200);
    for (const s of [live, both]) s.close();
    agent.destroy();
  });

  test("a paused sandbox's client connections are kept through sweeps (the client sends on them after a resume), and closed once it is gone", async () => {
    const host = `${h2c.port}-isbxpaused.${DOMAIN}:${front.port}`;
    front.targets.set("isbxpaused", target("isbxpaused", h2c.port));
    const client = front.h2session();
    assert.equal((await front.h2(client, host, "/seen")).status, 200);
    front.targets.delete("isbxpaused");
    paused.add("isbxpaused");
    front.proxy.sweep();
    front.proxy.sweep();
    assert.equal(client.closed || client.destroyed, false, "a paused sandbox's connection stays");
    front.targets.set("isbxpaused", target("isbxpaused", h2c.port));
    paused.delete("isbxpaused");
    assert.equal((await front.h2(client, host, "/seen")).status, 200, "after the resume the same connection serves");
    front.targets.delete("isbxpaused");
    const closed = once(client, "close");
    front.proxy.sweep();
    await closed;
  });
});

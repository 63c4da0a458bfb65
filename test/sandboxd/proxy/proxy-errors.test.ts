import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { DOMAIN, startFront, target, type Front } from "../helpers/proxy-front.js";
import { closedPort, startHttp1Target } from "../helpers/targets.js";

/** Sends raw bytes over TLS to the front; resolves with everything it answered. */
function rawRequest(front: Front, bytes: string): Promise<string> {
  return new Promise<string>((resolve) => {
    const sock = tlsConnect({ host: "127.0.0.1", port: front.port, ca: front.ca, servername: `x.${DOMAIN}`, ALPNProtocols: ["http/1.1"] }, () => sock.write(bytes));
    let out = "";
    sock.on("data", (c: Buffer) => (out += c.toString("latin1")));
    sock.on("close", () => resolve(out));
    sock.on("error", () => resolve(out));
  });
}

describe("proxy error answers", () => {
  let front: Front;
  let app: Awaited<ReturnType<typeof startHttp1Target>>;
  let envd: Awaited<ReturnType<typeof startHttp1Target>>;

  before(async () => {
    app = await startHttp1Target();
    envd = await startHttp1Target();
    front = await startFront();
    front.targets.set("irunning", target("irunning", envd.port));
    front.targets.set("ipaused", target("ipaused", envd.port, { state: "paused" }));
    front.targets.set("isecure", target("isecure", envd.port, { trafficAccessToken: "tok-123" }));
  });
  after(async () => {
    await front.close();
    app.server.close();
    envd.server.close();
  });

  const host = (port: number, id: string) => `${port}-${id}.${DOMAIN}:${front.port}`;

  test("unknown and paused sandboxes: 502 'The sandbox was not found', exactly, over HTTP/1.1 and HTTP/2", async () => {
    for (const id of ["iunknown", "ipaused"]) {
      const r = await front.h1(host(envd.port, id), "/health");
      assert.equal(r.status, 502);
      assert.equal(r.headers["content-type"], "application/json");
      assert.equal(r.body.toString(), `{"sandboxId":"${id}","message":"The sandbox was not found","code":502}`);
    }
    const s = front.h2session();
    const r = await front.h2(s, host(envd.port, "iunknown"), "/health");
    assert.equal(r.status, 502);
    assert.deepEqual(JSON.parse(r.body.toString()), { sandboxId: "iunknown", message: "The sandbox was not found", code: 502 });
    s.close();
  });

  test("a closed port: 502 'port is not open' with the port, over HTTP/1.1, HTTP/2 to envd and HTTP/2 to an app port", async () => {
    const port = await closedPort();
    const expected = `{"sandboxId":"irunning","message":"The sandbox is running but port is not open","port":${port},"code":502}`;
    const r1 = await front.h1(host(port, "irunning"), "/");
    assert.equal(r1.status, 502);
    assert.equal(r1.body.toString(), expected);
    front.targets.set("iclosedenvd", target("iclosedenvd", port));
    const s = front.h2session();
    const r2 = await front.h2(s, host(port, "iclosedenvd"), "/");
    assert.equal(r2.status, 502);
    assert.equal(r2.body.toString(), expected.replace("irunning", "iclosedenvd"));
    const r3 = await front.h2(s, host(port, "irunning"), "/");
    assert.equal(r3.status, 502);
    assert.equal(r3.body.toString(), expected);
    s.close();
  });

  test("browser navigations get the error as HTML; fetch-style and JSON clients get JSON", async () => {
    const ua = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120 Safari/537.36";
    const page = await front.h1(host(80, "iunknown"), "/", { headers: { "user-agent": ua, accept: "text/html,application/xhtml+xml" } });
    assert.equal(page.status, 502);
    assert.equal(page.headers["content-type"], "text/html; charset=utf-8");
    assert.match(page.body.toString(), /The sandbox was not found/);
    const cors = await front.h1(host(80, "iunknown"), "/", { headers: { "user-agent": ua, "sec-fetch-mode": "cors" } });
    assert.equal(cors.headers["content-type"], "application/json");
    const json = await front.h1(host(80, "iunknown"), "/", { headers: { "user-agent": ua, accept: "application/json" } });
    assert.equal(json.headers["content-type"], "application/json");
  });

  test("traffic token: required on app ports (missing, wrong of any length → 403 exactly), not on envd's port", async () => {
    const missing = await front.h1(host(app.port, "isecure"), "/seen");
    assert.equal(missing.status, 403);
    assert.equal(missing.body.toString(), `{"sandboxId":"isecure","message":"Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing","code":403}`);
    for (const wrong of ["tok-124", "t", "tok-123-and-more", ""]) {
      const r = await front.h1(host(app.port, "isecure"), "/seen", { headers: { "e2b-traffic-access-token": wrong } });
      assert.equal(r.status, 403, wrong);
      assert.equal(r.body.toString(), `{"sandboxId":"isecure","message":"Sandbox is secured with traffic access token. Provided token in header 'e2b-traffic-access-token' is invalid","code":403}`);
    }
    const seenBefore = app.seen.length;
    const ok = await front.h1(host(app.port, "isecure"), "/seen", { headers: { "e2b-traffic-access-token": "tok-123" } });
    assert.equal(ok.status, 200);
    assert.equal(app.seen.length, seenBefore + 1);
    const toEnvd = await front.h1(host(envd.port, "isecure"), "/seen");
    assert.equal(toEnvd.status, 200);
  });

  test("envd's internal paths are refused on envd's port in every spelling, and never reach it", async () => {
    const before = envd.seen.length;
    for (const path of ["/init", "/INIT", "//init", "/init/", "/init?x=1", "/%69nit", "/%2569nit", "/files/../init", "/./init", "/metrics", "/freeze", "/upgrade", "/init%"]) {
      const r = await front.h1(host(envd.port, "irunning"), path, { method: "POST", body: "{}" });
      assert.equal(r.status, 404, path);
      assert.equal(JSON.parse(r.body.toString()).sandboxId, "irunning");
    }
    assert.equal(envd.seen.length, before, "an internal path reached envd");
    const s = front.h2session();
    const h2 = await front.h2(s, host(envd.port, "irunning"), "/init", { method: "POST", body: "{}" });
    assert.equal(h2.status, 404);
    s.close();
    assert.equal(envd.seen.length, before);
    // An absolute-form target is routed by its path behind us, so it is checked by its path too.
    const absolute = await rawRequest(front, `POST http://anything/init HTTP/1.1\r\nHost: ${host(envd.port, "irunning")}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
    assert.match(absolute, /^HTTP\/1.1 404/);
    const star = await rawRequest(front, `OPTIONS * HTTP/1.1\r\nHost: ${host(envd.port, "irunning")}\r\nConnection: close\r\n\r\n`);
    assert.match(star, /^HTTP\/1.1 400/);
    assert.equal(envd.seen.length, before);
    // The same paths on an app's port belong to the app.
    const appInit = await front.h1(host(app.port, "irunning"), "/init");
    assert.equal(appInit.status, 200);
    const health = await front.h1(host(envd.port, "irunning"), "/health");
    assert.equal(health.status, 200);
  });

  test("requests in flight per sandbox are bounded (429 past the bound), and the slots come back", async () => {
    const slow = await startHttp1Target((req, res) => {
      if (req.url !== "/hold") return false;
      setTimeout(() => res.end("held"), 400);
      return true;
    });
    const bounded = await startFront({ limits: { maxPerSandbox: 2 } });
    bounded.targets.set("ibusy", target("ibusy", 49983));
    try {
      const h = `${slow.port}-ibusy.${DOMAIN}`;
      const held = [bounded.h1(h, "/hold"), bounded.h1(h, "/hold")];
      await new Promise((r) => setTimeout(r, 150));
      const third = await bounded.h1(h, "/hold");
      assert.equal(third.status, 429);
      assert.equal(JSON.parse(third.body.toString()).code, 429);
      for (const r of await Promise.all(held)) assert.equal(r.status, 200);
      assert.equal((await bounded.h1(h, "/hold")).status, 200);
    } finally {
      await bounded.close();
      slow.server.close();
    }
  });

  test("garbage does not take the listener down: raw bytes, no Host, odd hosts and headers", async () => {
    const raw = (bytes: string) =>
      new Promise<string>((resolve) => {
        const sock = tlsConnect({ host: "127.0.0.1", port: front.port, ca: front.ca, servername: `x.${DOMAIN}`, ALPNProtocols: ["http/1.1"] }, () => sock.end(bytes));
        let out = "";
        sock.on("data", (c: Buffer) => (out += c.toString("latin1")));
        sock.on("close", () => resolve(out));
        sock.on("error", () => resolve(out));
      });
    assert.match(await raw("\x00\x01\x02 garbage\r\n\r\n"), /^HTTP\/1.1 400/);
    assert.match(await raw("GET / HTTP/1.1\r\n\r\n"), /^HTTP\/1.1 400/);
    assert.match(await raw(`GET / HTTP/1.1\r\nHost: ${"a".repeat(300)}-x.${DOMAIN}\r\n\r\n`), /^HTTP\/1.1 400/);
    assert.match(await raw(`GET / HTTP/1.1\r\nHost: \u00ff\u00fe.${DOMAIN}\r\nConnection: close\r\n\r\n`), /^HTTP\/1.1 400/);
    assert.match(await raw(`GET / HTTP/1.1\r\nHost: [::1\r\nConnection: close\r\n\r\n`), /^HTTP\/1.1 (400|404)/);
    // A TLS client that hangs up mid-handshake, then plain text on the TLS port.
    await new Promise<void>((resolve) => {
      const sock = tlsConnect({ host: "127.0.0.1", port: front.port, rejectUnauthorized: false });
      sock.on("secureConnect", () => sock.destroy());
      sock.on("error", () => resolve());
      sock.on("close", () => resolve());
    });
    const s = front.h2session();
    const odd = await front.h2(s, "localhost", "/", { headers: { "e2b-sandbox-id": "../../etc", "e2b-sandbox-port": "80" } });
    assert.equal(odd.status, 400);
    assert.equal(odd.body.toString(), "Invalid sandbox ID\n");
    // A non-ASCII :authority is a protocol error of that stream only (nghttp2 resets it).
    await front.h2(s, `x-\u00e9.${DOMAIN}`, "/").then(
      (r) => assert.equal(r.status, 400),
      (err: NodeJS.ErrnoException) => assert.equal(err.code, "ERR_HTTP2_STREAM_ERROR"),
    );
    s.close();
    const ok = await front.h1(host(envd.port, "irunning"), "/health");
    assert.equal(ok.status, 200);
  });

  test("a kept-alive upstream socket the sandbox's server resets at the next request: a GET is sent again on a new one (once), a POST is a 502", async () => {
    // answers the first request on each connection (keep-alive), resets the connection at the second
    let connections = 0;
    const server = createServer((sock: Socket) => {
      connections++;
      let seen = 0;
      sock.on("data", () => {
        if (++seen === 1) sock.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok");
        else sock.resetAndDestroy();
      });
      sock.on("error", () => undefined);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as { port: number }).port;
    try {
      front.targets.set("iresets", target("iresets", port));
      const h = host(port, "iresets");
      assert.equal((await front.h1(h, "/a")).status, 200);
      const again = await front.h1(h, "/b");
      assert.deepEqual([again.status, again.body.toString()], [200, "ok"], "the GET went out again on a new connection");
      assert.equal(connections, 2);
      const post = await front.h1(h, "/c", { method: "POST", body: "x" });
      assert.equal(post.status, 502, "a request with a body is not sent twice");
    } finally {
      front.targets.delete("iresets");
      server.close();
    }
  });
});

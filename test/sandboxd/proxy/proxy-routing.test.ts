import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DOMAIN, startFront, target, type Front } from "../helpers/proxy-front.js";
import { startHttp1Target, startH2cTarget, type Seen } from "../helpers/targets.js";

describe("proxy routing by host and by headers", () => {
  let front: Front;
  let h1: Awaited<ReturnType<typeof startHttp1Target>>;
  let h2c: Awaited<ReturnType<typeof startH2cTarget>>;
  let apiCalls = 0;
  let ready = true;

  before(async () => {
    h1 = await startHttp1Target();
    h2c = await startH2cTarget();
    front = await startFront({
      api: (_req, res) => {
        apiCalls++;
        res.writeHead(200, { "content-type": "application/json" });
        res.end('{"api":true}');
      },
      ready: () => ready,
    });
    front.targets.set("isbxone", target("isbxone", h1.port));
    front.targets.set("isbxtwo", target("isbxtwo", h2c.port));
    front.targets.set("imasked", target("imasked", 49983, { maskRequestHost: "app.internal:${PORT}" }));
  });
  after(async () => {
    await front.close();
    h1.server.close();
    h2c.server.close();
  });

  const hostOf = (port: number, id: string) => `${port}-${id}.${DOMAIN}:${front.port}`;

  test("<port>-<id>.<domain> reaches the sandbox's port over HTTP/1.1, with forwarding headers and no hop-by-hop headers", async () => {
    const r = await front.h1(hostOf(h1.port, "isbxone"), "/seen?q=1", {
      headers: { connection: "keep-alive, x-drop-me", "x-drop-me": "1", "keep-alive": "timeout=5", "proxy-authorization": "Basic eA==", "x-keep": "yes" },
    });
    assert.equal(r.status, 200);
    const seen = JSON.parse(r.body.toString()) as Seen;
    assert.equal(seen.url, "/seen?q=1");
    assert.equal(seen.headers.host, hostOf(h1.port, "isbxone"));
    assert.equal(seen.headers["x-forwarded-for"], "127.0.0.1");
    assert.equal(seen.headers["x-forwarded-proto"], "https");
    assert.equal(seen.headers["x-keep"], "yes");
    for (const h of ["x-drop-me", "keep-alive", "proxy-authorization"]) assert.equal(seen.headers[h], undefined, h);
    // The target's own hop-by-hop answer headers do not reach the client (the listener sends its own).
    assert.notEqual(r.headers["keep-alive"], "timeout=5");
  });

  test("an existing X-Forwarded-For is extended, and the legacy <port>-<id>-<clientID> host routes to the ID", async () => {
    const r = await front.h1(`${h1.port}-isbxone-6532622b.${DOMAIN}`, "/seen", { headers: { "x-forwarded-for": "10.0.0.9" } });
    assert.equal(r.status, 200);
    assert.equal((JSON.parse(r.body.toString()) as Seen).headers["x-forwarded-for"], "10.0.0.9, 127.0.0.1");
  });

  test("HTTP/2 to envd's port goes upstream as h2c; to any other port as HTTP/1.1", async () => {
    const s = front.h2session();
    const toEnvd = await front.h2(s, hostOf(h2c.port, "isbxtwo"), "/seen");
    assert.equal(toEnvd.status, 200);
    const seenEnvd = JSON.parse(toEnvd.body.toString()) as Seen;
    assert.equal(seenEnvd.httpVersion, "2.0");
    assert.equal(seenEnvd.headers[":authority"], hostOf(h2c.port, "isbxtwo"));
    const toApp = await front.h2(s, hostOf(h1.port, "isbxtwo"), "/seen");
    assert.equal(toApp.status, 200);
    const seenApp = JSON.parse(toApp.body.toString()) as Seen;
    assert.equal(seenApp.httpVersion, "1.1");
    assert.equal(seenApp.headers.host, hostOf(h1.port, "isbxtwo"));
    s.close();
  });

  test("E2b-Sandbox-Id/-Port route requests whose host is localhost, an IP literal or sandbox.<domain>", async () => {
    for (const host of [`localhost:${front.port}`, `127.0.0.1:${front.port}`, `[::1]:${front.port}`, `sandbox.${DOMAIN}`]) {
      const r = await front.h1(host, "/seen", { headers: { "e2b-sandbox-id": "isbxone", "e2b-sandbox-port": String(h1.port) } });
      assert.equal(r.status, 200, host);
      assert.equal((JSON.parse(r.body.toString()) as Seen).url, "/seen");
    }
    const missing = await front.h1(`localhost:${front.port}`, "/seen", { headers: { "e2b-sandbox-id": "isbxone" } });
    assert.equal(missing.status, 400);
    assert.equal(missing.body.toString(), "missing header E2b-Sandbox-Port\n");
    // On a sandbox host the headers are ignored: the host decides.
    const r = await front.h1(hostOf(h1.port, "isbxone"), "/seen", { headers: { "e2b-sandbox-id": "inope", "e2b-sandbox-port": "1" } });
    assert.equal(r.status, 200);
  });

  test("malformed sandbox hosts get E2B's plain-text 400s", async () => {
    const cases: [string, string][] = [
      [`nodash.${DOMAIN}`, "Invalid host"],
      [`a.80-isbxone.${DOMAIN}`, "Invalid host"],
      [`http-isbxone.${DOMAIN}`, "Invalid sandbox port"],
      [`0-isbxone.${DOMAIN}`, "Invalid sandbox port"],
      [`70000-isbxone.${DOMAIN}`, "Invalid sandbox port"],
      [`80-.${DOMAIN}`, "Invalid sandbox ID"],
      [`80-i_bad.${DOMAIN}`, "Invalid sandbox ID"],
    ];
    for (const [host, text] of cases) {
      const r = await front.h1(host, "/");
      assert.equal(r.status, 400, host);
      assert.equal(r.headers["content-type"], "text/plain; charset=utf-8");
      assert.equal(r.body.toString(), text + "\n", host);
    }
  });

  test("api.<domain> goes to the API handler, /health reports readiness, the bare domain and foreign hosts get 404 JSON", async () => {
    const before = apiCalls;
    const api = await front.h1(`api.${DOMAIN}:${front.port}`, "/sandboxes");
    assert.equal(api.status, 200);
    assert.equal(apiCalls, before + 1);
    const health = await front.h1(`API.${DOMAIN.toUpperCase()}:${front.port}`, "/health");
    assert.equal(health.status, 200);
    assert.deepEqual(JSON.parse(health.body.toString()), { status: "ok" });
    ready = false;
    const notReady = await front.h1(`api.${DOMAIN}`, "/health");
    ready = true;
    assert.equal(notReady.status, 503);
    assert.equal(JSON.parse(notReady.body.toString()).code, 503);
    for (const host of [DOMAIN, "example.com", `api.${DOMAIN}.example.com`]) {
      const r = await front.h1(host, "/");
      assert.equal(r.status, 404, host);
      assert.equal(JSON.parse(r.body.toString()).code, 404);
    }
    const s = front.h2session();
    const h2health = await front.h2(s, `api.${DOMAIN}:${front.port}`, "/health");
    assert.equal(h2health.status, 200);
    s.close();
  });

  test("maskRequestHost replaces the Host for non-envd ports (${PORT} filled in) and leaves envd's alone", async () => {
    front.targets.set("imasked", target("imasked", 49983, { maskRequestHost: "app.internal:${PORT}" }));
    const masked = await front.h1(hostOf(h1.port, "imasked"), "/seen");
    assert.equal((JSON.parse(masked.body.toString()) as Seen).headers.host, `app.internal:${h1.port}`);
    front.targets.set("imasked", target("imasked", h1.port, { maskRequestHost: "app.internal:${PORT}" }));
    const envd = await front.h1(hostOf(h1.port, "imasked"), "/seen");
    assert.equal((JSON.parse(envd.body.toString()) as Seen).headers.host, hostOf(h1.port, "imasked"));
  });

  test("pooled upstream connections belong to one sandbox: a new sandbox at a freed address gets fresh ones (HTTP/1.1 and h2c)", async () => {
    const port = (r: { body: Buffer }) => (JSON.parse(r.body.toString()) as Seen).remotePort;
    front.targets.set("iold", target("iold", h2c.port));
    const s = front.h2session();
    const old1 = await front.h1(hostOf(h1.port, "iold"), "/seen");
    const old2 = await front.h1(hostOf(h1.port, "iold"), "/seen");
    assert.equal(port(old1), port(old2), "the keep-alive connection was not reused at all");
    const oldH2 = await front.h2(s, hostOf(h2c.port, "iold"), "/seen");
    front.targets.delete("iold");
    front.targets.set("inew", target("inew", h2c.port));
    const fresh = await front.h1(hostOf(h1.port, "inew"), "/seen");
    assert.notEqual(port(fresh), port(old2));
    const freshH2 = await front.h2(s, hostOf(h2c.port, "inew"), "/seen");
    assert.notEqual(port(freshH2), port(oldH2));
    s.close();
  });
});

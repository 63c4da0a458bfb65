import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { execFileSync } from "node:child_process";
import { Code, ConnectError } from "@connectrpc/connect";
import { startDaemon, type Daemon } from "./helpers/daemon.js";
import { basicAuth, clients, sdkSandbox } from "./helpers/clients.js";

let d: Daemon;
before(async () => {
  d = await startDaemon();
});
after(async () => {
  await d.stop();
});

function h2Get(port: number, path: string): Promise<{ status: number; headers: http2.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", reject);
    const req = session.request({ ":path": path, ":method": "GET" });
    req.on("response", (headers) => {
      req.resume();
      req.on("end", () => {
        session.close();
        resolve({ status: Number(headers[":status"]), headers });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

test("GET /health answers 204 no-store over HTTP/1.1 and h2c on one port", async () => {
  const r = await fetch(`${d.url}/health`);
  assert.equal(r.status, 204);
  assert.equal(r.headers.get("cache-control"), "no-store");
  const h2 = await h2Get(d.port, "/health");
  assert.equal(h2.status, 204);
  assert.equal(h2.headers["cache-control"], "no-store");
});

test("localhost works over IPv4 and IPv6", async () => {
  for (const host of ["127.0.0.1", "[::1]"]) {
    const r = await fetch(`http://${host}:${d.port}/health`);
    assert.equal(r.status, 204, host);
  }
});

test("every transport reaches both services", async () => {
  const c = clients(d.url);
  for (const kind of ["json", "binary", "grpc", "grpcWeb"] as const) {
    const st = await c.fs[kind].stat({ path: "/" });
    assert.equal(st.entry?.path, "/", kind);
    const list = await c.proc[kind].list({});
    assert.ok(Array.isArray(list.processes), kind);
  }
});

test("gzip-compressed Connect requests are accepted", async () => {
  const { createConnectTransport } = await import("@connectrpc/connect-node");
  const { createClient } = await import("@connectrpc/connect");
  const { Filesystem } = await import("../../src/envd/gen/filesystem/filesystem_pb.js");
  const { compressionGzip } = await import("@connectrpc/connect-node");
  const t = createConnectTransport({ baseUrl: d.url, httpVersion: "1.1", sendCompression: compressionGzip, acceptCompression: [compressionGzip], compressMinBytes: 0 });
  const st = await createClient(Filesystem, t).stat({ path: "/tmp" });
  assert.equal(st.entry?.name, "tmp");
});

test("Basic auth selects the user; unknown user is unauthenticated", async () => {
  const c = clients(d.url);
  const home = await c.fs.json.stat({ path: "" }, { headers: basicAuth("root") });
  assert.equal(home.entry?.path, "/home/user", "empty path resolves to the default workdir");
  const rel = await c.fs.json.stat({ path: "." }, { headers: basicAuth("root") });
  assert.equal(rel.entry?.path, "/root");
  await assert.rejects(
    c.fs.json.stat({ path: "." }, { headers: basicAuth("nobody-such-user") }),
    (e: unknown) => e instanceof ConnectError && e.code === Code.Unauthenticated && /invalid username: 'nobody-such-user'/.test(e.message),
  );
  const raw = await fetch(`${d.url}/filesystem.Filesystem/Stat`, {
    method: "POST",
    headers: { "content-type": "application/json", ...basicAuth("ghost") },
    body: "{}",
  });
  assert.equal(raw.status, 401);
  assert.deepEqual(await raw.json(), { code: "unauthenticated", message: "invalid username: 'ghost'" });
});

test("a user created after start is found", async () => {
  const name = `envdt${process.pid % 100000}`;
  execFileSync("useradd", ["-m", "-d", `/tmp/${name}-home`, "-s", "/bin/bash", name]);
  try {
    const c = clients(d.url);
    const st = await c.fs.binary.stat({ path: "." }, { headers: basicAuth(name) });
    assert.equal(st.entry?.path, `/tmp/${name}-home`);
    assert.equal(st.entry?.owner, name);
  } finally {
    execFileSync("userdel", ["-r", name], { stdio: "ignore" });
  }
});

test("bad input gets clear errors and the daemon stays up", async () => {
  const post = (path: string, body: string, ct: string) =>
    fetch(`${d.url}${path}`, { method: "POST", headers: { "content-type": ct }, body });
  const malformed = await post("/filesystem.Filesystem/Stat", "{not json", "application/json");
  assert.equal(malformed.status, 400);
  assert.equal((await malformed.json()).code, "invalid_argument");
  const wrongType = await post("/filesystem.Filesystem/Stat", "{}", "text/plain");
  assert.equal(wrongType.status, 415);
  const unknown = await post("/filesystem.Filesystem/Nope", "{}", "application/json");
  assert.equal(unknown.status, 404);
  const route404 = await fetch(`${d.url}/nope`);
  assert.equal(route404.status, 404);
  assert.equal(await route404.text(), "404 page not found\n");
  const wrongMethod = await fetch(`${d.url}/health`, { method: "POST" });
  assert.equal(wrongMethod.status, 405);
  // Garbage on the socket: answered 400 or closed, never a crash.
  const reply = await new Promise<string>((resolve) => {
    const s = net.connect(d.port, "127.0.0.1", () => s.write("\x16\x03\x01garbage\r\n\r\n"));
    let buf = "";
    s.on("data", (x) => (buf += x));
    s.on("close", () => resolve(buf));
    s.on("error", () => resolve(buf));
    setTimeout(() => s.destroy(), 3000);
  });
  assert.match(reply, /^(HTTP\/1\.1 400|)/);
  const bad2 = await new Promise<string>((resolve) => {
    const s = net.connect(d.port, "127.0.0.1", () => s.end("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x04garbage-frame"));
    let buf = "";
    s.on("data", (x) => (buf += x.toString("latin1")));
    s.on("close", () => resolve(buf));
    s.on("error", () => resolve(buf));
    setTimeout(() => s.destroy(), 3000);
  });
  assert.equal(typeof bad2, "string");
  assert.equal((await fetch(`${d.url}/health`)).status, 204);
});

test("CORS preflight is answered before auth", async () => {
  const r = await fetch(`${d.url}/process.Process/List`, {
    method: "OPTIONS",
    headers: { origin: "http://x", "access-control-request-method": "POST", "access-control-request-headers": "x-foo" },
  });
  assert.equal(r.status, 204);
  assert.equal(r.headers.get("access-control-allow-origin"), "*");
  assert.equal(r.headers.get("access-control-allow-headers"), "x-foo");
  assert.equal(r.headers.get("access-control-max-age"), "7200");
});

test("/metrics has every field with plausible values, and CPU % is a delta", async () => {
  const r = await fetch(`${d.url}/metrics`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type") ?? "", /application\/json/);
  const m = await r.json();
  for (const k of ["ts", "cpu_count", "cpu_used_pct", "mem_total", "mem_used", "mem_cache", "mem_total_mib", "mem_used_mib", "disk_total", "disk_used"]) {
    assert.equal(typeof m[k], "number", k);
  }
  assert.ok(Math.abs(m.ts - Date.now() / 1000) < 5);
  assert.ok(m.cpu_count >= 1);
  assert.ok(m.cpu_used_pct >= 0 && m.cpu_used_pct <= 100);
  assert.ok(m.mem_total > m.mem_used && m.mem_used > 0);
  assert.equal(m.mem_total_mib, Math.floor(m.mem_total / 1048576));
  assert.ok(m.disk_total >= m.disk_used && m.disk_used > 0);
});

test("the published e2b SDK sees the sandbox running", async () => {
  const sbx = await sdkSandbox(d.url);
  assert.equal(await sbx.isRunning(), true);
});

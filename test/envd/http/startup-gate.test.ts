import { test } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { EarlyGate, type Handler } from "../../../src/envd/http/early.js";
import { Server } from "../../../src/envd/http/server.js";
import { createJsonLogger } from "../../../src/common/log.js";
import { ROOT, startDaemon, type Daemon } from "../helpers/daemon.js";
import { sdkSandbox } from "../helpers/clients.js";
import { ARTIFACT_NAME } from "../helpers/image-machine.js";

const quiet = createJsonLogger({ level: "silent", fd: 2, name: "test" });

/** envd's own HTTP server on loopback, with the gate as its handler. */
async function gateServer(gate: EarlyGate): Promise<{ port: number; close(): Promise<void> }> {
  const server = new Server(gate.handle, quiet);
  const port = await server.listen(0, "127.0.0.1");
  return { port, close: () => server.close(0) };
}

/** Sends raw request bytes on a new connection; resolves with everything received until the answer looks whole (or the connection ends). */
function raw(port: number, request: string, until = /\r\n\r\n[\s\S]*$/): { socket: net.Socket; answer: Promise<string> } {
  const socket = net.connect(port, "127.0.0.1");
  socket.write(request);
  let got = "";
  const answer = new Promise<string>((resolve) => {
    socket.setEncoding("utf8");
    socket.on("data", (d: string) => {
      got += d;
      if (until.test(got)) resolve(got);
    });
    socket.on("close", () => resolve(got));
    socket.on("error", () => resolve(got));
  });
  return { socket, answer };
}

/** Settles after `ms` with "pending", or with the promise's value if that comes first. */
function within<T>(p: Promise<T>, ms: number): Promise<T | "pending"> {
  return Promise.race([p, new Promise<"pending">((r) => setTimeout(() => r("pending"), ms))]);
}

test("while the rest loads, a plain GET /health is answered at once and every other request waits, in order, for the full handler", async () => {
  let loads = 0;
  const gate = new EarlyGate(quiet, () => loads++, 60_000);
  const srv = await gateServer(gate);
  try {
    const health = raw(srv.port, "GET /health HTTP/1.1\r\nHost: a\r\n\r\n");
    const first = await health.answer;
    assert.match(first, /^HTTP\/1\.1 204 No Content\r\n/);
    assert.match(first, /\r\nCache-Control: no-store\r\n/);
    assert.match(first, /\r\nAccess-Control-Allow-Origin: \*\r\n/);
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    assert.equal(loads, 1, "the first early answer asks for the rest to load");
    health.socket.destroy();

    // Not plain: a query, an Origin (CORS), a body, another method or path: they wait.
    const waiting = [
      raw(srv.port, "GET /health?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"),
      raw(srv.port, "GET /health HTTP/1.1\r\nHost: a\r\nOrigin: http://o\r\n\r\n"),
      raw(srv.port, "GET /health HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nab"),
      raw(srv.port, "HEAD /health HTTP/1.1\r\nHost: a\r\n\r\n"),
      raw(srv.port, "POST /init HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"),
    ];
    const gone = raw(srv.port, "GET /gone HTTP/1.1\r\nHost: a\r\n\r\n");
    for (const w of waiting) assert.equal(await within(w.answer, 100), "pending", "a request that is not a plain /health waited");
    gone.socket.destroy();
    await new Promise((r) => setTimeout(r, 50));

    const seen: string[] = [];
    const full: Handler = (req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.setHeader("Content-Length", "4");
      res.end("full");
    };
    gate.open(full);
    const answers = await Promise.all(waiting.map((w) => w.answer));
    for (const a of answers) assert.match(a, /^HTTP\/1\.1 200 OK\r\n/);
    assert.deepEqual(seen, ["GET /health?x=1", "GET /health", "GET /health", "HEAD /health", "POST /init"], "in arrival order, without the request whose client left");
    const later = raw(srv.port, "GET /health HTTP/1.1\r\nHost: a\r\n\r\n", /full$/);
    assert.match(await later.answer, /^HTTP\/1\.1 200 OK[\s\S]*full$/, "once open, /health goes to the full handler too");
    for (const w of [...waiting, later]) w.socket.destroy();
    assert.equal(loads, 1, "the rest is asked for once");
  } finally {
    await srv.close();
  }
});

test("the rest loads without any request too (after the fallback delay), and a waiting request asks for it at once", async () => {
  let idleLoads = 0;
  const idle = new EarlyGate(quiet, () => idleLoads++, 30);
  idle.armed();
  assert.equal(idleLoads, 0);
  await new Promise((r) => setTimeout(r, 80));
  assert.equal(idleLoads, 1, "loaded after the fallback delay");

  let loads = 0;
  const gate = new EarlyGate(quiet, () => loads++, 60_000);
  gate.armed();
  const srv = await gateServer(gate);
  try {
    const init = raw(srv.port, "POST /init HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}");
    for (let i = 0; i < 100 && loads === 0; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(loads, 1, "a request that must wait starts the load");
    gate.open((_req, res) => res.end());
    assert.match(await init.answer, /^HTTP\/1\.1 200 OK/);
    init.socket.destroy();
  } finally {
    await srv.close();
  }
});

test("an HTTP/2 request that arrives while the rest loads waits too, and is answered on the same session once it opens", async () => {
  const gate = new EarlyGate(quiet, () => undefined, 60_000);
  const srv = await gateServer(gate);
  const session = http2.connect(`http://127.0.0.1:${srv.port}`);
  try {
    const stream = session.request({ ":method": "GET", ":path": "/health" });
    let status: number | undefined;
    stream.on("response", (h) => void (status = Number(h[":status"])));
    const body = new Promise<string>((resolve, reject) => {
      let text = "";
      stream.setEncoding("utf8").on("data", (d: string) => (text += d)).on("end", () => resolve(text)).on("error", reject);
    });
    assert.equal(await within(body, 150), "pending", "not a plain HTTP/1.x /health: it waits");
    gate.open((req, res) => {
      res.setHeader("x-by", "full");
      res.end(`full ${req.httpVersionMajor}`);
    });
    assert.equal(await body, "full 2");
    assert.equal(status, 200);
  } finally {
    session.destroy();
    await srv.close();
  }
});

/** Resolves once the daemon's debug log has its "loaded" line, parsed. */
async function loadedLine(d: Daemon): Promise<{ from: string; codeCache?: string }> {
  for (let i = 0; i < 500; i++) {
    const line = d.logs().split("\n").find((l) => l.includes('"msg":"loaded"'));
    if (line) return JSON.parse(line) as { from: string; codeCache?: string };
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no "loaded" line in:\n${d.logs()}`);
}

test("the gate's /health answer is byte for byte the full handler's (Date aside)", async () => {
  const d = await startDaemon();
  const gate = new EarlyGate(quiet, () => undefined, 60_000);
  const srv = await gateServer(gate);
  try {
    const sbx = await sdkSandbox(d.url);
    await sbx.commands.run("true"); // the daemon's full handler is in place
    const ask = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    const fromGate = raw(srv.port, ask);
    const fromDaemon = raw(d.port, ask);
    const [g, f] = await Promise.all([fromGate.answer, fromDaemon.answer]);
    fromGate.socket.destroy();
    fromDaemon.socket.destroy();
    const noDate = (s: string) => s.replace(/\r\nDate: [^\r]*/, "");
    assert.match(f, /^HTTP\/1\.1 204 /);
    assert.equal(noDate(g), noDate(f));
  } finally {
    await srv.close();
    await d.stop();
  }
});

const sea = join(ROOT, "dist", ARTIFACT_NAME, "envd");

for (const [label, bin, from] of [["dist/envd", undefined, "file"], ["the release executable", sea, "sea"]] as const) {
  test(`${label} loads the rest once it listens, with the code cache made at build time, and then serves`, async () => {
    if (bin) assert.ok(existsSync(bin), `${bin} is not built (./build.sh --envd-artifact)`);
    const d = await startDaemon({ bin, args: ["--log-level", "debug"] });
    try {
      const loaded = await loadedLine(d);
      assert.equal(loaded.from, from);
      assert.equal(loaded.codeCache, "accepted", "V8 took the rest's code cache");
      const logs = d.logs();
      assert.ok(logs.indexOf('"msg":"listening"') < logs.indexOf('"msg":"loaded"'), "listening comes first");
      const sbx = await sdkSandbox(d.url);
      const out = await sbx.commands.run("echo served-$((6*7))");
      assert.equal(out.stdout, "served-42\n");
    } finally {
      await d.stop();
    }
  });
}

// Bodies nobody has authenticated cannot hold the daemon's memory or connections: many slow
// /init bodies over HTTP/1.1 and many /init streams on one h2c session keep RSS bounded and are
// answered (429 at once beyond the slots, 408 for a body too slow, 413 for one too large)
// within seconds; the body left after a 401 on /files is drained within bounds, then the
// connection is closed.
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import http2 from "node:http2";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { procStats, sleep } from "../helpers/fuzz.js";

const N = 60;
const CHUNK = "a".repeat(64 * 1024);
/**
 * Bodies all buffered would add 60 × 4 MiB (the audit saw RSS go from 54 to over 300 MiB); the
 * bounded daemon holds at most 8 MiB of bodies, and the rest is the churn of discarded chunks
 * and per-connection state, which the first burst after start also spends on compiled code.
 */
const MAX_GROWTH_MIB = 120;

/** Peak RSS of the daemon (KiB) sampled every 50 ms while `work` runs. */
async function peakRss(d: Daemon, work: Promise<unknown>): Promise<number> {
  let peak = procStats(d.pid).rssKiB;
  let done = false;
  void work.finally(() => (done = true));
  while (!done) {
    peak = Math.max(peak, procStats(d.pid).rssKiB);
    await sleep(50);
  }
  return Math.max(peak, procStats(d.pid).rssKiB);
}

/**
 * An HTTP/1.1 request that declares `length` bytes of body and then sends 64 KiB every
 * `everyMs` (pressing as fast as the daemon takes them when 0). Resolves with the status line's
 * code (0: none), and when the connection closed after the start (-1: still open at `limitMs`).
 */
function slowBody(port: number, head: string, length: number, everyMs: number, limitMs: number): Promise<{ status: number; closedMs: number }> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    let text = "";
    const s = net.connect(port, "127.0.0.1");
    s.on("error", () => undefined);
    let sent = 0;
    const pump = (): void => {
      while (s.writable && sent < length) {
        sent += CHUNK.length;
        const more = s.write(CHUNK);
        if (everyMs > 0) return void setTimeout(pump, everyMs);
        if (!more) return void s.once("drain", pump);
      }
    };
    s.on("connect", () => {
      s.write(`${head}Content-Length: ${length}\r\n\r\n`);
      pump();
    });
    s.on("data", (c: Buffer) => (text += c.toString("latin1")));
    const timer = setTimeout(() => (s.destroy(), finish(-1)), limitMs);
    const finish = (closedMs: number): void => {
      clearTimeout(timer);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), closedMs });
    };
    s.on("close", () => finish(Date.now() - t0));
  });
}

test("60 slow 4 MiB /init bodies over HTTP/1.1: RSS bounded, each answered and closed within seconds", async (t) => {
  const d = await startDaemon();
  try {
    await sleep(300);
    const before = procStats(d.pid).rssKiB;
    // As the audit sent them: each declares 4 MiB (the old limit) and sends 64 KiB every 100 ms.
    const runs = Promise.all(Array.from({ length: N }, () => slowBody(d.port, "POST /init HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n", 4 * 1024 * 1024 - 1, 100, 20_000)));
    const peak = await peakRss(d, runs);
    const results = await runs;
    const statuses = results.map((r) => r.status).sort();
    const slowest = Math.max(...results.map((r) => r.closedMs));
    const growthMiB = (peak - before) / 1024;
    t.diagnostic(`RSS ${before} KiB → peak ${peak} KiB; slowest closed after ${slowest} ms`);
    assert.ok(results.every((r) => r.closedMs >= 0), `connections still open after 20 s: ${results.filter((r) => r.closedMs < 0).length}`);
    assert.ok(slowest < 8000, `the slowest was closed after ${slowest} ms`);
    assert.ok(results.every((r) => [413, 429].includes(r.status)), `answers: ${statuses.join(",")}`);
    assert.ok(growthMiB < MAX_GROWTH_MIB, `RSS grew by ${growthMiB.toFixed(1)} MiB (from ${before} KiB)`);
    assert.equal((await fetch(`${d.url}/health`)).status, 204);
  } finally {
    await d.stop();
  }
});

test("60 dribbled /init bodies of an allowed size: 8 slots time out with 408, the rest get 429 at once; all closed in seconds", async () => {
  const d = await startDaemon();
  try {
    const t0 = Date.now();
    const results = await Promise.all(Array.from({ length: N }, () => slowBody(d.port, "POST /init HTTP/1.1\r\nHost: x\r\n", 1024 * 1024 - 1, 500, 20_000)));
    const statuses = results.map((r) => r.status).sort();
    assert.ok(results.every((r) => r.closedMs >= 0 && r.closedMs < 10_000), `closed after ${results.map((r) => r.closedMs).join(",")} ms`);
    assert.equal(statuses.filter((s) => s === 408).length, 8, `answers: ${statuses.join(",")}`);
    assert.equal(statuses.filter((s) => s === 429).length, N - 8, `answers: ${statuses.join(",")}`);
    assert.ok(Date.now() - t0 < 12_000);
    const ok = await fetch(`${d.url}/init`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ envVars: { A: "b" } }) });
    assert.equal(ok.status, 204, "a real /init gets through afterwards");
  } finally {
    await d.stop();
  }
});

test("60 slow /init streams on one h2c session: RSS bounded, every stream answered within seconds", async (t) => {
  const d = await startDaemon();
  const session = http2.connect(d.url);
  session.on("error", () => undefined);
  try {
    await sleep(300);
    const before = procStats(d.pid).rssKiB;
    // No declared length: 64 KiB every 100 ms, up to 4 MiB, until the stream is answered or reset.
    const one = (): Promise<number | string> =>
      new Promise((resolve) => {
        const req = session.request({ ":method": "POST", ":path": "/init", "content-type": "application/json" });
        let sent = 0;
        const pump = (): void => {
          if (req.destroyed || req.writableEnded) return;
          if ((sent += CHUNK.length) >= 4 * 1024 * 1024) return void req.end(CHUNK);
          req.write(CHUNK);
          setTimeout(pump, 100);
        };
        req.on("response", (h) => resolve(Number(h[":status"])));
        req.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
        req.on("close", () => resolve(`reset ${req.rstCode}`));
        req.resume();
        pump();
      });
    const t0 = Date.now();
    const runs = Promise.all(Array.from({ length: N }, one));
    const peak = await peakRss(d, runs);
    const outcomes = (await runs).sort();
    const ms = Date.now() - t0;
    const growthMiB = (peak - before) / 1024;
    t.diagnostic(`RSS ${before} KiB → peak ${peak} KiB; answered in ${ms} ms`);
    assert.ok(outcomes.every((o) => o === 413 || o === 429), `answers: ${outcomes.join(",")}`);
    assert.equal(outcomes.filter((o) => o === 429).length, N - 8, `answers: ${outcomes.join(",")}`);
    assert.ok(ms < 10_000, `all answered after ${ms} ms`);
    assert.ok(growthMiB < MAX_GROWTH_MIB, `RSS grew by ${growthMiB.toFixed(1)} MiB (from ${before} KiB)`);
    assert.equal(session.destroyed, false, "the session goes on");
    assert.equal((await fetch(`${d.url}/health`)).status, 204);
  } finally {
    session.destroy();
    await d.stop();
  }
});

test("the body after a 401 on /files is drained within bounds, then the connection is closed", async () => {
  const d = await startDaemon();
  try {
    assert.equal((await fetch(`${d.url}/init`, { method: "POST", body: JSON.stringify({ accessToken: "tok-drain" }) })).status, 204);
    const head = "POST /files?path=/tmp/envd-drain-x HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n";
    // Sent as fast as taken: closed once more than the drain allowance has come.
    const fast = await slowBody(d.port, head, 1024 * 1024 * 1024, 0, 15_000);
    assert.equal(fast.status, 401);
    assert.ok(fast.closedMs >= 0 && fast.closedMs < 5000, `a 1 GiB body after the 401: closed after ${fast.closedMs} ms`);
    // Dribbled: closed when the drain time is up.
    const slow = await slowBody(d.port, head, 1024 * 1024 * 1024, 500, 15_000);
    assert.equal(slow.status, 401);
    assert.ok(slow.closedMs >= 0 && slow.closedMs < 6000, `a dribbled body after the 401: closed after ${slow.closedMs} ms`);
    assert.equal((await fetch(`${d.url}/health`)).status, 204);
  } finally {
    await d.stop();
  }
});

// Stalled subscribers (the failure E2B users hit after a pause/resume): frozen readers on the
// same process as live ones, over HTTP/1.1 (socket not read) and h2c (no window updates).
// The live readers keep receiving every byte in order, the process keeps running, and a
// frozen reader is cut with resource_exhausted once it is too far behind (16 MiB) instead of
// holding anyone back. ENVD_SOAK=1 reads for longer, with more readers.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import http2 from "node:http2";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { clients } from "../helpers/clients.js";
import { assertHealthy, budget, dechunk, envelope, parseEnvelopes, sleep } from "../helpers/fuzz.js";
import { Signal } from "../../../src/envd/gen/process/process_pb.js";

let d: Daemon;
before(async () => {
  d = await startDaemon();
});
after(async () => {
  await d?.stop();
});

const sel = (pid: number) => ({ selector: { case: "pid" as const, value: pid } });

/**
 * Reads stdout of a process through Connect until `enough` bytes came or `ms` passed, checking
 * that the numbers it prints are consecutive (nothing lost, nothing reordered).
 */
async function liveReader(c: ReturnType<typeof clients>, kind: "json" | "binary" | "grpc", pid: number, ms: number, enough = Infinity, stop?: Promise<unknown>) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), ms);
  void stop?.then(() => ac.abort());
  let carry: string | undefined; // the first line of the first chunk may start mid-number
  let last = -1;
  let bytes = 0;
  let gaps = 0;
  try {
    for await (const r of c.proc[kind].connect({ process: sel(pid) }, { signal: ac.signal })) {
      const ev = r.event?.event;
      if (ev?.case !== "data" || ev.value.output.case !== "stdout") continue;
      bytes += ev.value.output.value.length;
      if (bytes >= enough) ac.abort();
      const text = (carry ?? "") + Buffer.from(ev.value.output.value).toString("latin1");
      const lines = text.split("\n");
      if (carry === undefined) lines.shift();
      carry = lines.pop() ?? "";
      for (const line of lines) {
        const n = Number(line);
        if (last >= 0 && n !== last + 1) gaps++;
        last = n;
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  } finally {
    clearTimeout(timer);
  }
  return { bytes, gaps, last };
}

/** An HTTP/1.1 Connect whose client stops reading right after sending: the socket is paused for good. */
function frozenH1(pid: number): { socket: net.Socket; thaw(): Promise<Buffer> } {
  const body = envelope(0, JSON.stringify({ process: { pid } }));
  const socket = net.connect(d.port, "127.0.0.1", () => {
    socket.write(`POST /process.Process/Connect HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\nContent-Length: ${body.length}\r\n\r\n`);
    socket.write(body);
  });
  socket.pause();
  socket.on("error", () => undefined);
  return {
    socket,
    thaw: () =>
      new Promise((resolve) => {
        const chunks: Buffer[] = [];
        const done = () => resolve(Buffer.concat(chunks));
        socket.on("data", (c: Buffer) => {
          chunks.push(c);
          // The chunked response is complete (the connection itself stays open for keep-alive).
          if (c.subarray(-5).toString("latin1") === "0\r\n\r\n") (socket.destroy(), done());
        });
        socket.on("close", done);
        socket.on("end", done);
        setTimeout(() => (socket.destroy(), done()), 10_000);
        socket.resume();
      }),
  };
}

/** An h2c Connect stream that is never read, so the daemon runs out of flow-control window. */
function frozenH2(pid: number): { session: http2.ClientHttp2Session; stream: http2.ClientHttp2Stream } {
  const session = http2.connect(d.url);
  session.on("error", () => undefined);
  const stream = session.request({ ":method": "POST", ":path": "/process.Process/Connect", "content-type": "application/connect+json" });
  stream.on("error", () => undefined);
  stream.pause();
  stream.end(envelope(0, JSON.stringify({ process: { pid } })));
  return { session, stream };
}

test("frozen readers beside live ones: the live ones get every byte, the process runs on, the frozen are cut", async (t) => {
  const c = clients(d.url);
  // Read until well past the 16 MiB a frozen reader may hold (time-bounded: CI machines are slow).
  const readMs = budget(35_000, 150_000);
  // A frozen reader holds up to 16 MiB queued plus what the socket buffers take (~4 MiB here).
  const enough = budget(32, 200) * 1048576;
  const frozenCount = budget(1, 3);
  const liveKinds = budget(["json", "binary"] as const, ["json", "binary", "grpc", "binary", "json"] as const);
  // Consecutive numbers at ~4 MB/s (~2 MB/s in soak, with more readers on a busier machine):
  // every live reader keeps up (one that cannot is cut once 16 MiB behind the fastest one: see
  // the next test), the frozen ones fall behind.
  const script = `i=1; while :; do seq $i $((i+9999)); i=$((i+10000)); sleep ${budget("0.02", "0.04")}; done`;
  const starter = c.proc.binary.start({ process: { cmd: "/bin/sh", args: ["-c", script] }, tag: "producer" });
  const it = starter[Symbol.asyncIterator]();
  const first = await it.next();
  assert.equal(first.value?.event?.event.case, "start", "Start's first event");
  const pid = (first.value!.event!.event.value as { pid: number }).pid;
  await it.return?.(); // the Start caller goes away at once; the process lives on

  const h1 = Array.from({ length: frozenCount }, () => frozenH1(pid));
  const h2 = Array.from({ length: frozenCount }, () => frozenH2(pid));
  await sleep(300);
  const results = await Promise.all(liveKinds.map((k) => liveReader(c, k, pid, readMs, enough)));
  for (const [i, r] of results.entries()) t.diagnostic(`live reader ${liveKinds[i]}: ${Math.round(r.bytes / 1048576)} MiB, last number ${r.last}`);
  for (const [i, r] of results.entries()) {
    assert.equal(r.gaps, 0, `live reader ${liveKinds[i]} missed output`);
    // Beyond the 16 MiB a frozen reader may hold: the frozen ones did not set the pace.
    assert.ok(r.bytes > 17 * 1048576, `live reader ${liveKinds[i]} got only ${r.bytes} bytes`);
  }
  const listed = (await c.proc.json.list({})).processes.map((p) => p.pid);
  assert.ok(listed.includes(pid), "the process is still running");

  const tRead = Date.now();
  // The frozen HTTP/1.1 readers, thawed: what they buffered, then the end-stream with resource_exhausted.
  for (const f of h1) {
    const raw = await f.thaw();
    const sep = raw.indexOf("\r\n\r\n");
    assert.match(raw.subarray(0, sep).toString(), /^HTTP\/1\.1 200/, "frozen reader's response head");
    const frames = parseEnvelopes(dechunk(raw.subarray(sep + 4)));
    const end = frames.at(-1);
    assert.equal(end?.flags, 2, `the frozen reader's stream was ended with an end-stream envelope (${frames.length} frames, ${raw.length} bytes)`);
    const err = (JSON.parse(end!.data.toString()) as { error?: { code: string; message: string } }).error;
    assert.equal(err?.code, "resource_exhausted", `frozen reader ended with ${end!.data}`);
    assert.match(err!.message, /fell too far behind/);
  }
  // The frozen h2 streams: reading them now ends the same way (grpc-style code in the envelope).
  for (const f of h2) {
    const chunks: Buffer[] = [];
    f.stream.on("data", (b: Buffer) => chunks.push(b));
    await new Promise<void>((resolve) => {
      f.stream.on("close", () => resolve());
      setTimeout(() => (f.stream.close(), resolve()), 10_000);
      f.stream.resume();
    });
    const end = parseEnvelopes(Buffer.concat(chunks)).at(-1);
    assert.equal(end?.flags, 2, "frozen h2 stream got an end-stream envelope");
    assert.match(end!.data.toString(), /resource_exhausted/);
    f.session.close();
  }
  t.diagnostic(`thawing the frozen readers took ${Date.now() - tRead} ms`);
  // A reader arriving after all this (the "resumed" client) is served at once.
  const again = await liveReader(c, "json", pid, 1000);
  assert.ok(again.bytes > 0 && again.gaps === 0, "a new Connect after the stall gets output");

  await c.proc.json.sendSignal({ process: sel(pid), signal: Signal.SIGKILL });
  await assertHealthy(d, "after stalled subscribers");
});

test("a reader that keeps falling behind the fastest one is cut once 16 MiB behind; the fast one goes on (documented limit)", async () => {
  const c = clients(d.url);
  const starter = c.proc.binary.start({ process: { cmd: "/usr/bin/seq", args: ["1", "1000000000000"] }, tag: "fast-and-slow" });
  const it = starter[Symbol.asyncIterator]();
  const pid = ((await it.next()).value!.event!.event.value as { pid: number }).pid;
  await it.return?.();
  // The slow reader takes one message every 50 ms (≤ 0.7 MB/s); the fast one reads freely
  // until the slow one has been cut (or time is up).
  const slow = (async () => {
    try {
      for await (const r of c.proc.grpc.connect({ process: sel(pid) })) {
        void r;
        await sleep(50);
      }
      return "ended";
    } catch (err) {
      return String(err);
    }
  })();
  const fast = await liveReader(c, "binary", pid, budget(40_000, 90_000), Infinity, slow);
  assert.equal(fast.gaps, 0, "the fast reader missed output");
  assert.ok(fast.bytes >= 16 * 1048576, `the fast reader got ${fast.bytes} bytes`);
  const slowEnd = await Promise.race([slow, sleep(5_000).then(() => "still running")]);
  assert.match(slowEnd, /resource_exhausted|ResourceExhausted|fell too far behind/, `the slow reader ended with: ${slowEnd}`);
  await c.proc.json.sendSignal({ process: sel(pid), signal: Signal.SIGKILL });
  await assertHealthy(d, "after a slow reader");
});

test("a frozen Start caller does not hold back the process or its Connect readers", async () => {
  const c = clients(d.url);
  // The Start stream itself is the frozen reader here (HTTP/1.1, socket never read).
  const body = envelope(0, JSON.stringify({ process: { cmd: "/usr/bin/seq", args: ["1", "1000000000000"] }, tag: "frozen-start" }));
  const socket = net.connect(d.port, "127.0.0.1", () => {
    socket.write(`POST /process.Process/Start HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+json\r\nContent-Length: ${body.length}\r\n\r\n`);
    socket.write(body);
  });
  socket.pause();
  socket.on("error", () => undefined);
  let pid = 0;
  for (let i = 0; i < 50 && !pid; i++) {
    await sleep(50);
    pid = (await c.proc.json.list({})).processes.find((p) => p.tag === "frozen-start")?.pid ?? 0;
  }
  assert.ok(pid > 0, "the process started");
  const r = await liveReader(c, "binary", pid, budget(15_000, 60_000), budget(20, 200) * 1048576);
  assert.equal(r.gaps, 0, "the Connect reader missed output");
  assert.ok(r.bytes > 17 * 1048576, `Connect reader got ${r.bytes} bytes beside a frozen Start caller`);
  socket.destroy();
  await c.proc.json.sendSignal({ process: sel(pid), signal: Signal.SIGKILL });
  await assertHealthy(d, "after a frozen Start caller");
});


import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { startDaemon, type Daemon } from "./helpers/daemon.js";
import { leanStart, leanStartSocket, startRequest } from "../../bench/lib/connect-reader.js";
import { ChunkedBody } from "../../bench/lib/chunked-body.js";
import { StartFrames } from "../../bench/lib/start-frames.js";

// The bench's lean readers carry its throughput targets, so they must count exactly what the
// daemon sent and refuse what is malformed. Checked against the real daemon, and by replaying a
// real answer one byte per push into a buffer that is overwritten after every push (what the
// socket reader's reused read buffer does).

let daemon: Daemon;
before(async () => {
  daemon = await startDaemon();
});
after(async () => {
  await daemon.stop();
});

/** The raw HTTP/1.1 bytes of one Start answer from the daemon. */
function rawStart(binary: boolean, cmd: string, args: string[]): Promise<Buffer> {
  const { type, body } = startRequest(cmd, args, binary);
  return new Promise((resolve, reject) => {
    const s = net.connect(daemon.port, "127.0.0.1");
    const parts: Buffer[] = [];
    s.on("data", (d: Buffer) => parts.push(d));
    s.on("error", reject);
    s.on("close", () => resolve(Buffer.concat(parts)));
    s.write(`POST /process.Process/Start HTTP/1.1\r\nHost: x\r\nContent-Type: ${type}\r\nAuthorization: Basic dXNlcjo=\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
    s.write(body);
  });
}

/** Feeds `raw` one byte at a time through a scratch buffer wiped after each push. */
function replay(raw: Buffer, binary: boolean): StartFrames {
  const frames = new StartFrames(binary);
  const http = new ChunkedBody((chunk, status) => {
    assert.equal(status, 200);
    frames.push(chunk);
  });
  const scratch = Buffer.alloc(1);
  for (const byte of raw) {
    scratch[0] = byte;
    http.push(scratch);
    scratch.fill(0xee);
  }
  http.finish();
  return frames;
}

for (const binary of [true, false]) {
  const codec = binary ? "binary" : "JSON";
  test(`lean readers count a ${codec} Start's output exactly, over Node's http and over a socket`, async () => {
    const size = 3 * 2 ** 20 + 7;
    for (const read of [leanStart, leanStartSocket]) {
      const r = await read(daemon.url, "/usr/bin/head", ["-c", String(size), "/dev/zero"], binary);
      assert.equal(r.bytes, size, read.name);
      assert.equal(r.exitCode, 0, read.name);
      assert.ok(r.frames >= 4, `${read.name}: start, data, end and end-of-stream frames, got ${r.frames}`);
    }
    const failing = await leanStartSocket(daemon.url, "/bin/sh", ["-c", "printf abc; exit 3"], binary);
    assert.equal(failing.bytes, 3);
    assert.equal(failing.exitCode, 3);
  });

  test(`a ${codec} Start answer replayed one byte per push through a reused buffer decodes the same`, async () => {
    const raw = await rawStart(binary, "/bin/sh", ["-c", "printf 'hello world'; exit 5"]);
    const out = replay(raw, binary).finish();
    assert.equal(out.bytes, 11);
    assert.equal(out.exitCode, 5);
    assert.equal(out.frames, 4);
  });
}

test("the readers refuse a cut answer, a bad chunk, an error end-of-stream and a cut frame", async () => {
  const raw = await rawStart(true, "/bin/echo", ["hi"]);
  assert.throws(() => replay(raw.subarray(0, raw.length - 9), true), /cut short|ended/);
  const badChunk = Buffer.from(raw.toString("latin1").replace("\r\n0\r\n\r\n", "\r\nzz\r\n\r\n"), "latin1");
  assert.throws(() => replay(badChunk, true), /bad chunk size line/);
  const eos = Buffer.from(`{"error":{"code":"not_found","message":"no such dir"}}`);
  const head = Buffer.from([2, 0, 0, 0, 0]);
  head.writeUInt32BE(eos.length, 1);
  assert.throws(() => new StartFrames(false).push(Buffer.concat([head, eos])), /stream ended with not_found: no such dir/);
  const frames = new StartFrames(true);
  frames.push(Buffer.from([0, 0, 0, 0, 9, 0x0a]));
  assert.throws(() => frames.finish(), /inside a frame/);
});

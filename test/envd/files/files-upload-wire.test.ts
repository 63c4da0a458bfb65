import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { tempDir } from "../helpers/clients.js";

// HTTP/1.1 requests whose first packet (the one the port's protocol sniffer reads) also carries
// body bytes, or a second pipelined request: the native parser that takes over the socket
// afterwards must see those bytes first and in order.

let d: Daemon;
let dir: { path: string; cleanup(): void };

before(async () => {
  d = await startDaemon();
  dir = await tempDir("files-up-wire");
});

after(async () => {
  dir.cleanup();
  await d.stop();
});

/** Sends `parts` over one connection with a pause between them; resolves with everything read until `done(text)`. */
function exchange(parts: Buffer[], done: (text: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect(Number(new URL(d.url).port), "127.0.0.1");
    let text = "";
    sock.on("data", (c: Buffer) => {
      text += c.toString("latin1");
      if (done(text)) {
        sock.destroy();
        resolve(text);
      }
    });
    sock.on("error", reject);
    sock.on("connect", async () => {
      for (const p of parts) {
        sock.write(p);
        await new Promise((r) => setTimeout(r, 30));
      }
    });
    setTimeout(() => {
      sock.destroy();
      reject(new Error(`no complete answer; got: ${text.slice(0, 300)}`));
    }, 10_000);
  });
}

const head = (path: string, length: number) =>
  Buffer.from(`POST /files?path=${encodeURIComponent(path)}&username=root HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: ${length}\r\n\r\n`);

test("a body that starts in the sniffed first packet arrives whole and in order", async () => {
  const path = join(dir.path, "split.bin");
  const body = randomBytes(300_000);
  const first = Buffer.concat([head(path, body.length), body.subarray(0, 1000)]);
  const answer = await exchange([first, body.subarray(1000, 150_000), body.subarray(150_000)], (t) => t.includes("]"));
  assert.match(answer, /^HTTP\/1\.1 200 /);
  assert.ok(readFileSync(path).equals(body));
});

test("two pipelined uploads in the first packet are both stored", async () => {
  const a = join(dir.path, "a.txt");
  const b = join(dir.path, "b.txt");
  const packet = Buffer.concat([head(a, 5), Buffer.from("first"), head(b, 6), Buffer.from("second")]);
  const answer = await exchange([packet], (t) => (t.match(/HTTP\/1\.1 200 /g) ?? []).length === 2 && t.trimEnd().endsWith("]"));
  assert.equal((answer.match(/HTTP\/1\.1 200 /g) ?? []).length, 2);
  assert.equal(readFileSync(a, "utf8"), "first");
  assert.equal(readFileSync(b, "utf8"), "second");
});

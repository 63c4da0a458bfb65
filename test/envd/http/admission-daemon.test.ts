// Start requests arriving together are admitted a turn's budget at a time (src/http/admission.ts).
// Through the real daemon: a burst over one HTTP/2 session all runs, and the Starts whose client
// cancelled while they waited in the queue start no process.
import { spawnSync } from "node:child_process";
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { envelope } from "../helpers/fuzz.js";

let d: Daemon;
let session: http2.ClientHttp2Session;
const AUTH = `Basic ${Buffer.from("root:").toString("base64")}`;
const TAG = `admission-${process.pid}`;

before(async () => {
  d = await startDaemon();
  session = http2.connect(d.url);
});

/** How long the queued Starts sleep: an odd value, so that `after` can end exactly these. */
const SLEEP = "19.75";

after(async () => {
  session?.close();
  await d?.stop();
  spawnSync("pkill", ["-f", `^/bin/sleep ${SLEEP}$`]);
});

function start(cmd: string, args: string[], tag: string): http2.ClientHttp2Stream {
  const req = session.request({ ":method": "POST", ":path": "/process.Process/Start", "content-type": "application/connect+json", authorization: AUTH });
  req.end(envelope(0, JSON.stringify({ process: { cmd, args }, tag })));
  return req;
}

function body(req: http2.ClientHttp2Stream): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString()));
    req.on("error", reject);
  });
}

async function listTags(): Promise<string[]> {
  const req = session.request({ ":method": "POST", ":path": "/process.Process/List", "content-type": "application/json", authorization: AUTH });
  req.end("{}");
  const list = JSON.parse(await body(req)) as { processes?: { tag?: string }[] };
  return (list.processes ?? []).map((p) => p.tag ?? "");
}

test("a burst of Starts over one HTTP/2 session: every one runs, and in order of arrival per stream", async () => {
  const n = 120;
  const answers = await Promise.all(Array.from({ length: n }, (_, i) => body(start("/bin/echo", [`n${i}`], `${TAG}-echo`))));
  answers.forEach((text, i) => {
    assert.match(text, new RegExp(Buffer.from(`n${i}\n`).toString("base64")), `Start ${i} carries its own output`);
    assert.match(text, /"exitCode":0|"exited":true/, `Start ${i} ended normally: ${text.slice(-200)}`);
  });
});

test("a Start cancelled while it waits for admission starts no process", async () => {
  // The daemon is stopped while the client sends every Start and then the cancellations, so that
  // it reads them all in one poll of its loop: the Starts ahead fill far more than one turn's
  // admission budget, and the cancelled ones are queued behind them when their RST_STREAM is
  // read. Without the stop, how the client's writes and the daemon's reads interleave decides
  // (seen on a freshly booted machine: two were admitted before their cancellation arrived).
  // Long enough sleeps that on a loaded machine none has ended before the last one is admitted.
  process.kill(d.pid, "SIGSTOP");
  let ahead: http2.ClientHttp2Stream[];
  try {
    ahead = Array.from({ length: 150 }, (_, i) => start("/bin/sleep", [SLEEP], `${TAG}-ahead-${i}`));
    const cancelled = Array.from({ length: 20 }, (_, i) => start("/bin/sleep", [SLEEP], `${TAG}-cancelled-${i}`));
    for (const req of cancelled) {
      req.on("error", () => undefined);
      req.close(http2.constants.NGHTTP2_CANCEL);
    }
    // every frame written to the socket (the kernel holds them for the stopped daemon)
    for (let i = 0; i < 100 && (i < 5 || session.socket.writableLength > 0); i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(session.socket.writableLength, 0, "the client wrote every frame while the daemon was stopped");
  } finally {
    process.kill(d.pid, "SIGCONT");
  }
  // Every Start ahead reports its start event once admitted.
  await Promise.all(ahead.map((req) => new Promise<void>((resolve, reject) => {
    req.once("data", () => resolve());
    req.once("error", reject);
  })));
  const tags = await listTags();
  const running = tags.filter((t) => t.startsWith(`${TAG}-ahead-`)).length;
  assert.equal(running, 150, "every Start ahead runs");
  assert.deepEqual(tags.filter((t) => t.startsWith(`${TAG}-cancelled-`)), [], "no cancelled Start has a process");
  // Each was dropped at its turn, not handled as a request whose stream had closed (which would
  // wait forever for a body that never ends).
  const dropped = () => d.logs().split("\n").filter((l) => l.includes("client left before its request was admitted") && l.includes("/process.Process/Start")).length;
  for (let i = 0; i < 50 && dropped() < 20; i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal(dropped(), 20);
  for (const req of ahead) req.close(http2.constants.NGHTTP2_CANCEL);
});

// Output read into reused slabs (src/process/read-slabs.ts) must never be overwritten while a
// subscriber can still send it: random output is checked by SHA-256 over every path that takes
// slab views (binary and JSON frames, HTTP/1.1 and h2c, fast and slow readers, two
// subscribers at different speeds) and every path that copies them (gRPC, gzip).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Process, type ProcessEvent } from "../../../src/envd/gen/process/process_pb.js";
import { Lease, SlabReader, freeSlabCount } from "../../../src/envd/process/read-slabs.js";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { clients, tempDir } from "../helpers/clients.js";

type ProcClient = Client<typeof Process>;

let d: Daemon;
let t: { path: string; cleanup(): void };
let blob: string;
let want: string;
let wantPart: string;
const SIZE = 24 * 1024 * 1024;
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

before(async () => {
  d = await startDaemon();
  t = await tempDir("slabs");
  const data = randomBytes(SIZE);
  blob = `${t.path}/blob`;
  await writeFile(blob, data);
  want = sha(data);
  wantPart = sha(data.subarray(0, 8 * 1024 * 1024));
});
after(async () => {
  await d?.stop();
  t?.cleanup();
});

/** Hashes stdout and stderr of a stream; `pauseEvery` events the reader sleeps a little (a slow client). */
async function digest(stream: AsyncIterable<{ event?: ProcessEvent }>, pauseEvery = 0) {
  const out = { stdout: createHash("sha256"), stderr: createHash("sha256") };
  const bytes = { stdout: 0, stderr: 0 };
  let pid = 0;
  let exitCode: number | undefined;
  let n = 0;
  for await (const r of stream) {
    const e = r.event?.event;
    if (e?.case === "start") pid = e.value.pid;
    if (e?.case === "data" && (e.value.output.case === "stdout" || e.value.output.case === "stderr")) {
      out[e.value.output.case].update(e.value.output.value);
      bytes[e.value.output.case] += e.value.output.value.byteLength;
      if (pauseEvery && ++n % pauseEvery === 0) await sleep(2);
    }
    if (e?.case === "end") exitCode = e.value.exitCode;
  }
  return { pid, exitCode, bytes, stdout: out.stdout.digest("hex"), stderr: out.stderr.digest("hex") };
}

function transport(httpVersion: "1.1" | "2", useBinaryFormat: boolean): ProcClient {
  return createClient(Process, createConnectTransport({ baseUrl: d.url, httpVersion, useBinaryFormat, acceptCompression: [] }));
}

test("random output is byte-exact on every frame path, fast and slow readers", async () => {
  const ways: [string, ProcClient, number][] = [
    ["binary h2c", transport("2", true), 0],
    ["binary HTTP/1.1", transport("1.1", true), 0],
    ["JSON HTTP/1.1", transport("1.1", false), 0],
    ["binary HTTP/1.1, slow reader", transport("1.1", true), 4],
    ["binary h2c, slow reader", transport("2", true), 4],
    ["JSON h2c, slow reader", transport("2", false), 4],
  ];
  for (const [name, client, pauseEvery] of ways) {
    const got = await digest(client.start({ process: { cmd: "cat", args: [blob] } }), pauseEvery);
    assert.equal(got.bytes.stdout, SIZE, name);
    assert.equal(got.stdout, want, name);
    assert.equal(got.exitCode, 0, name);
  }
});

test("random output is byte-exact on the copying paths (gRPC, gzip)", async () => {
  const c = clients(d.url);
  for (const [name, client] of [["grpc", c.proc.grpc], ["json+gzip", c.proc.json]] as const) {
    const got = await digest(client.start({ process: { cmd: "cat", args: [blob] } }));
    assert.equal(got.stdout, want, name);
  }
});

test("stdout and stderr at once, each byte-exact", async () => {
  const got = await digest(transport("2", true).start({ process: { cmd: "/bin/sh", args: ["-c", `cat ${blob} >&2 & cat ${blob}; wait`] } }));
  assert.equal(got.stdout, want);
  assert.equal(got.stderr, want);
});

test("three subscribers at different speeds (one copying, one slow frame reader) all get every byte", async () => {
  // 8 MiB: a slower subscriber is cut once 16 MiB behind the fastest (by design, see Broadcast).
  const part = 8 * 1024 * 1024;
  const fast = transport("2", true);
  const slow = transport("1.1", false);
  const tag = `slabs-${process.pid}`;
  const first = fast.start({ process: { cmd: "/bin/sh", args: ["-c", `sleep 0.5; head -c ${part} ${blob}`] }, tag });
  const iter = first[Symbol.asyncIterator]();
  const start = await iter.next();
  assert.equal(start.value?.event?.event.case, "start");
  const rest = { [Symbol.asyncIterator]: () => iter };
  const grpc = clients(d.url).proc.grpc;
  const [a, b, c] = await Promise.all([
    digest(rest),
    digest(slow.connect({ process: { selector: { case: "tag", value: tag } } }), 3),
    digest(grpc.connect({ process: { selector: { case: "tag", value: tag } } })),
  ]);
  for (const got of [a, b, c]) {
    assert.equal(got.bytes.stdout, part);
    assert.equal(got.stdout, wantPart);
  }
});

const KiB = 1024;

test("slabs: quiet reads are copies out of one shared buffer", () => {
  const r = new SlabReader();
  const a = r.buffer();
  a.write("hello", 0, "latin1");
  const first = r.took(5);
  const b = r.buffer();
  assert.equal(b, a, "the same shared buffer is offered again");
  b.write("world", 0, "latin1");
  const second = r.took(5);
  assert.equal(first.toString(), "hello", "the first read was copied out");
  assert.equal(second.toString(), "world");
  const g = r.drain();
  assert.deepEqual(g.reads, [first, second]);
  g.published();
  r.close();
});

test("slabs: a slab is reused only when full and released by every holder", () => {
  const r = new SlabReader();
  r.buffer().fill(9, 0, 64 * KiB);
  const copy = r.took(64 * KiB); // a bulk-size read: copied out of the shared buffer, slabs from now on
  assert.ok(copy.every((x) => x === 9));
  const views: Buffer[] = [];
  for (let i = 0; i < 8; i++) {
    const buf = r.buffer();
    assert.ok(buf.length >= 128 * KiB, "a slab offers room for a big read");
    buf.fill(i, 0, 128 * KiB);
    views.push(r.took(128 * KiB));
  }
  assert.ok(views.every((v) => v.buffer === views[0].buffer), "eight reads fill one slab");
  const group = r.drain();
  assert.equal(group.reads.length, 9);
  assert.ok(group.lease, "slab reads come with a lease");
  group.lease!.hold(2); // two subscribers queued the events
  group.published();
  const next = r.buffer(); // the full slab is retired, a fresh one offered
  assert.notEqual(next.buffer, views[0].buffer);
  const pooled = freeSlabCount();
  group.lease!.release();
  assert.equal(freeSlabCount(), pooled, "still held by one subscriber");
  views.forEach((v, i) => assert.ok(v.every((x) => x === i), "views untouched while held"));
  group.lease!.release();
  assert.equal(freeSlabCount(), pooled + 1, "released by both: back in the pool");
  r.close();
});

test("slabs: a quiet turn leaves the slab, which an unpublished read still holds", () => {
  const r = new SlabReader();
  r.buffer();
  r.took(20 * KiB); // bulk: slabs on
  r.drain().published();
  const view = r.buffer();
  const read = r.took(1000);
  assert.equal(read.buffer, view.buffer, "a view of the slab, not a copy");
  const g = r.drain(); // 1000 bytes: a quiet turn
  const pooled = freeSlabCount();
  const offered = r.buffer();
  assert.notEqual(offered.buffer, view.buffer, "back on the shared buffer");
  assert.equal(freeSlabCount(), pooled, "the unpublished read holds its slab");
  g.published();
  assert.equal(freeSlabCount(), pooled + 1);
  assert.ok(g.lease instanceof Lease);
  r.buffer();
  r.took(10);
  assert.equal(r.drain().lease, undefined, "copies only: no lease");
  r.close();
});

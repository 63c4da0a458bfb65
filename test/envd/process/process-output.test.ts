import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { type Client } from "@connectrpc/connect";
import { Process, Signal, type ProcessEvent } from "../../../src/envd/gen/process/process_pb.js";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { clients, tempDir } from "../helpers/clients.js";

type ProcClient = Client<typeof Process>;

let d: Daemon;
let json: ProcClient;
let binary: ProcClient;

before(async () => {
  d = await startDaemon();
  const c = clients(d.url);
  json = c.proc.json;
  binary = c.proc.binary;
});
after(async () => {
  await d?.stop();
});

const pidSel = (pid: number) => ({ selector: { case: "pid" as const, value: pid } });
const enc = new TextEncoder();

/** Consumes a process stream, hashing and counting stdout without keeping it. */
async function digest(stream: AsyncIterable<{ event?: ProcessEvent }>) {
  const hash = createHash("sha256");
  let bytes = 0;
  let pid = 0;
  let end: { exitCode: number; status: string } | undefined;
  for await (const r of stream) {
    const e = r.event?.event;
    if (e?.case === "start") pid = e.value.pid;
    if (e?.case === "data" && e.value.output.case === "stdout") {
      hash.update(e.value.output.value);
      bytes += e.value.output.value.byteLength;
    }
    if (e?.case === "end") end = e.value;
  }
  return { pid, bytes, sha256: hash.digest("hex"), end };
}

test("1 MiB of random output arrives byte-exact over JSON and binary", async () => {
  const t = await tempDir("proc-1mib");
  try {
    const data = randomBytes(1024 * 1024);
    await writeFile(`${t.path}/blob`, data);
    const want = createHash("sha256").update(data).digest("hex");
    for (const client of [json, binary]) {
      const got = await digest(client.start({ process: { cmd: "cat", args: [`${t.path}/blob`] } }));
      assert.equal(got.bytes, data.length);
      assert.equal(got.sha256, want);
      assert.equal(got.end?.exitCode, 0);
    }
  } finally {
    await t.cleanup();
  }
});

/** Opens a raw HTTP/1.1 Connect stream to a process and never reads the response. */
function stalledConnect(pid: number): Promise<Socket> {
  const url = new URL(d.url);
  const body = Buffer.from(JSON.stringify({ process: { pid } }));
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  body.copy(frame, 5);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(url.port), url.hostname, () => {
      sock.write(
        `POST /process.Process/Connect HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/connect+json\r\n` +
          `Connect-Protocol-Version: 1\r\nContent-Length: ${frame.length}\r\n\r\n`,
      );
      sock.write(frame);
      sock.pause(); // never read: the kernel buffers fill and the daemon's writes stall
      setTimeout(() => resolve(sock), 300);
    });
    sock.on("error", reject);
  });
}

/** Resumes a paused socket and reads it until the server ends the response (or 20 s pass). */
function readToEnd(sock: Socket): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const done = (): void => {
      clearTimeout(timer);
      const all = Buffer.concat(chunks);
      resolve(all.subarray(Math.max(0, all.length - 4096)).toString("latin1"));
    };
    const timer = setTimeout(done, 20_000);
    sock.on("data", (b: Buffer) => {
      chunks.push(b);
      // The end of a chunked HTTP/1.1 response.
      if (b.subarray(-5).toString() === "0\r\n\r\n") done();
    });
    sock.on("end", done);
    sock.resume();
  });
}

test("a stalled subscriber next to a live one: the live one gets everything, the process finishes, the stalled one is ended with resource_exhausted", { timeout: 180_000 }, async () => {
  const it = json.start({ process: { cmd: "/bin/bash", args: ["-c", "read x; head -c 64M /dev/zero; echo -n tail"] }, stdin: true })[Symbol.asyncIterator]();
  const first = await it.next();
  const pid = (first.value!.event!.event.value as { pid: number }).pid;
  const stalled = await stalledConnect(pid);
  try {
    const liveConnect = digest(json.connect({ process: pidSel(pid) }));
    await new Promise((r) => setTimeout(r, 200));
    await binary.sendInput({ process: pidSel(pid), input: { input: { case: "stdin", value: enc.encode("go\n") } } });
    const [start, viaConnect] = await Promise.all([digest({ [Symbol.asyncIterator]: () => it }), liveConnect]);
    for (const got of [start, viaConnect]) {
      assert.equal(got.bytes, 64 * 1024 * 1024 + 4);
      assert.equal(got.end?.exitCode, 0);
    }
    assert.equal(start.sha256, viaConnect.sha256);
    const listed = await binary.list({});
    assert.ok(!listed.processes.some((p) => p.pid === pid), "the process finished");
    // Reading again, the stalled stream gets what was buffered, then an error saying why it was ended.
    const text = await readToEnd(stalled);
    assert.match(text, /"code":"resource_exhausted"/);
    assert.match(text, /fell too far behind/);
  } finally {
    stalled.destroy();
  }
});

test("with no subscriber, output is discarded and the process is not blocked", async () => {
  const controller = new AbortController();
  const it = binary.start({ process: { cmd: "/bin/bash", args: ["-c", "head -c 32M /dev/zero; sleep 0.3; echo -n fin"] } }, { signal: controller.signal })[Symbol.asyncIterator]();
  const pid = ((await it.next()).value!.event!.event.value as { pid: number }).pid;
  controller.abort();
  await it.return?.();
  let listed = true;
  for (let i = 0; i < 100 && listed; i++) {
    await new Promise((r) => setTimeout(r, 100));
    listed = (await binary.list({})).processes.some((p) => p.pid === pid);
  }
  assert.equal(listed, false, "the unsubscribed process ran to its end");
  const late = await digest(binary.connect({ process: pidSel(pid) }));
  assert.equal(late.end?.exitCode, 0);
});

test("200 concurrent commands all succeed", { timeout: 60_000 }, async () => {
  const results = await Promise.all(
    Array.from({ length: 200 }, async (_, i) => {
      const events: string[] = [];
      let code = -2;
      for await (const r of binary.start({ process: { cmd: "echo", args: [`n${i}`] } })) {
        const e = r.event?.event;
        if (e?.case === "data" && e.value.output.case === "stdout") events.push(Buffer.from(e.value.output.value).toString());
        if (e?.case === "end") code = e.value.exitCode;
      }
      return { out: events.join(""), code, i };
    }),
  );
  for (const r of results) {
    assert.equal(r.code, 0, `command ${r.i}`);
    assert.equal(r.out, `n${r.i}\n`);
  }
});

test("SIGKILL via SendSignal returns only after the process is reaped", async () => {
  const it = json.start({ process: { cmd: "sleep", args: ["100"] } })[Symbol.asyncIterator]();
  const pid = ((await it.next()).value!.event!.event.value as { pid: number }).pid;
  await json.sendSignal({ process: pidSel(pid), signal: Signal.SIGKILL });
  assert.throws(() => process.kill(pid, 0), (e: NodeJS.ErrnoException) => e.code === "ESRCH");
  const rest = await digest({ [Symbol.asyncIterator]: () => it });
  assert.equal(rest.end?.status, "signal: killed");
});

test("Start works over gRPC and gRPC-Web too", async () => {
  const c = clients(d.url);
  for (const client of [c.proc.grpc, c.proc.grpcWeb]) {
    const got = await digest(client.start({ process: { cmd: "printf", args: ["%s", "hello"] } }));
    assert.equal(got.bytes, 5);
    assert.equal(got.end?.exitCode, 0);
  }
});

test("daemon shutdown ends open streams but leaves user processes running", async () => {
  const own = await startDaemon();
  let pid = 0;
  try {
    const client = clients(own.url).proc.json;
    const it = client.start({ process: { cmd: "sleep", args: ["60"] } })[Symbol.asyncIterator]();
    pid = ((await it.next()).value!.event!.event.value as { pid: number }).pid;
    const rest = digest({ [Symbol.asyncIterator]: () => it }).then(
      () => "ended",
      () => "ended with an error",
    );
    const started = Date.now();
    await own.stop();
    assert.ok(Date.now() - started < 6000, "the daemon exits promptly");
    assert.match(await rest, /ended/);
    assert.doesNotThrow(() => process.kill(pid, 0), "the user process outlives the daemon");
  } finally {
    if (pid) process.kill(pid, "SIGKILL");
    await own.stop();
  }
});

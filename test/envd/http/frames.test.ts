import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { gunzipSync } from "node:zlib";
import { create, toBinary, toJsonString, type DescMessage } from "@bufbuild/protobuf";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { ConnectResponseSchema, StartResponseSchema } from "../../../src/envd/gen/process/process_pb.js";
import { processEventFrame } from "../../../src/envd/process/frames.js";
import { chunkedDataEvent, eventSize } from "../../../src/envd/process/events.js";
import { startDaemon } from "../helpers/daemon.js";

const KINDS = ["stdout", "stderr", "pty"] as const;
// Around every varint boundary of the three nested lengths and the inline-copy limit.
const SIZES = [0, 1, 100, 121, 122, 123, 127, 128, 16_370, 16_384, 16_385, 65_536, 262_144, 2_097_140, 2_097_160];

function joined(pieces: Uint8Array[]): Buffer {
  return Buffer.concat(pieces);
}

for (const schema of [StartResponseSchema, ConnectResponseSchema] as DescMessage[]) {
  test(`${schema.typeName}: hand-written data frames equal protobuf-es + connect-es bytes (binary and JSON)`, () => {
    for (const kind of KINDS) {
      for (const n of SIZES) {
        const payload = randomBytes(n);
        const msg = create(schema as typeof StartResponseSchema, {
          event: { event: { case: "data", value: { output: { case: kind, value: payload } } } },
        });
        const bin = processEventFrame(msg, true)?.pieces;
        assert.ok(bin, `${kind} ${n}: binary frame`);
        assert.deepEqual(joined(bin), Buffer.from(encodeEnvelope(0, toBinary(schema, msg))), `${kind} ${n} binary`);
        // Big payloads are referenced, not copied.
        if (n > 16_384) assert.equal(bin[bin.length - 1], payload, `${kind} ${n}: payload passed by reference`);
        const json = processEventFrame(msg, false)?.pieces;
        assert.ok(json, `${kind} ${n}: JSON frame`);
        const expected = Buffer.from(encodeEnvelope(0, new TextEncoder().encode(toJsonString(schema, msg))));
        assert.deepEqual(joined(json), expected, `${kind} ${n} json`);
      }
    }
  });
}

test("an event over several reads: frames reference each read, protobuf-es sees the joined bytes", () => {
  for (const sizes of [[1, 2, 3], [65_536, 65_536, 1], [10_000, 7_000], [0, 5], [1, 1, 1, 1], [2, 2, 2], [1, 65_537, 2, 4]]) {
    const reads = sizes.map((n) => randomBytes(n));
    const total = sizes.reduce((a, b) => a + b, 0);
    const joinedBytes = Buffer.concat(reads);
    const event = chunkedDataEvent("stderr", reads, total);
    assert.equal(eventSize(event), 64 + total, `${sizes}: size without joining`);
    for (const schema of [StartResponseSchema, ConnectResponseSchema]) {
      const msg = create(schema, { event });
      const plain = create(schema, { event: { event: { case: "data", value: { output: { case: "stderr", value: joinedBytes } } } } });
      const bin = processEventFrame(msg, true)!.pieces;
      if (total > 16_384) assert.ok(reads.every((r) => bin.includes(r)), `${sizes}: every read passed by reference`);
      assert.deepEqual(joined(bin), Buffer.from(encodeEnvelope(0, toBinary(schema, plain))), `${sizes}: binary frame`);
      // The generic paths (gRPC, compressed, JSON) read output.value: the joined payload.
      assert.deepEqual(Buffer.from(toBinary(schema, msg)), Buffer.from(toBinary(schema, plain)), `${sizes}: toBinary`);
      assert.equal(toJsonString(schema, msg), toJsonString(schema, plain), `${sizes}: toJsonString`);
      assert.deepEqual(joined(processEventFrame(msg, false)!.pieces), joined(processEventFrame(plain, false)!.pieces), `${sizes}: JSON frame`);
    }
  }
});

test("start, end and keep-alive frames equal protobuf-es + connect-es bytes (binary and JSON)", () => {
  const ends = [];
  for (const exitCode of [0, 1, -1, 3, 127, 255, 2_147_483_647, -2_147_483_648]) {
    for (const exited of [true, false]) {
      for (const status of ["", "exit status 1", "signal: killed", 'quote " backslash \\ newline \n é ✓ \u2028 \u0000']) {
        for (const error of [undefined, "", "signal: killed", "x".repeat(300)]) ends.push({ exitCode, exited, status, error });
      }
    }
  }
  const events = [
    ...[0, 1, 127, 128, 16_384, 4_194_304, 4_294_967_295].map((pid) => ({ case: "start" as const, value: { pid } })),
    ...ends.map((value) => ({ case: "end" as const, value })),
    { case: "keepalive" as const, value: {} },
  ];
  for (const schema of [StartResponseSchema, ConnectResponseSchema] as DescMessage[]) {
    for (const event of events) {
      const msg = create(schema as typeof StartResponseSchema, { event: { event } });
      const name = `${schema.typeName} ${JSON.stringify(event)}`;
      assert.deepEqual(joined(processEventFrame(msg, true)!.pieces), Buffer.from(encodeEnvelope(0, toBinary(schema, msg))), `${name} binary`);
      const json = Buffer.from(encodeEnvelope(0, new TextEncoder().encode(toJsonString(schema, msg))));
      assert.deepEqual(joined(processEventFrame(msg, false)!.pieces), json, `${name} JSON`);
    }
  }
});

test("messages without an event or output take the generic path", () => {
  assert.equal(processEventFrame(create(StartResponseSchema, {}), true), undefined, "no event");
  const noOutput = create(StartResponseSchema, { event: { event: { case: "data", value: {} } } });
  assert.equal(processEventFrame(noOutput, true), undefined, "data event without output");
  assert.equal(processEventFrame(noOutput, false), undefined, "data event without output");
});

/** Splits a Connect stream body into frames. */
function parseFrames(body: Buffer): { flags: number; data: Buffer }[] {
  const out: { flags: number; data: Buffer }[] = [];
  for (let i = 0; i < body.length; ) {
    const len = body.readUInt32BE(i + 1);
    out.push({ flags: body[i], data: body.subarray(i + 5, i + 5 + len) });
    i += 5 + len;
  }
  return out;
}

function startBody(cmd: string, args: string[], cwd?: string): Uint8Array<ArrayBuffer> {
  const json = Buffer.from(JSON.stringify({ process: { cmd, args, cwd } }));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(json.length, 1);
  return new Uint8Array(Buffer.concat([head, json]));
}

test("Start over plain fetch: exact JSON frames, end-of-stream, errors and the gzip fallback", async () => {
  const d = await startDaemon();
  try {
    const post = (body: Uint8Array<ArrayBuffer>, headers: Record<string, string> = {}) =>
      fetch(`${d.url}/process.Process/Start`, {
        method: "POST",
        headers: { "content-type": "application/connect+json", authorization: "Basic cm9vdDo=", ...headers },
        body,
      });

    // 300 KiB of output in one process: every byte arrives, frames are exact, the stream ends with {}.
    const res = await post(startBody("/usr/bin/head", ["-c", "307200", "/dev/urandom"]));
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "application/connect+json");
    assert.equal(res.headers.get("connect-content-encoding"), null);
    const frames = parseFrames(Buffer.from(await res.arrayBuffer()));
    const last = frames.pop()!;
    assert.equal(last.flags, 2);
    assert.deepEqual(JSON.parse(last.data.toString()), {});
    const events = frames.map((f) => JSON.parse(f.data.toString()).event);
    assert.ok(events[0].start.pid > 0);
    const stdout = events.filter((e) => e.data).map((e) => Buffer.from(e.data.stdout, "base64"));
    assert.equal(Buffer.concat(stdout).length, 307200);
    assert.deepEqual(events.at(-1).end, { exited: true, status: "exit status 0" });

    // A failing start is an end-of-stream error frame with the daemon's code and message.
    const bad = parseFrames(Buffer.from(await (await post(startBody("/bin/true", [], "/no/such/dir"))).arrayBuffer()));
    assert.equal(bad.length, 1);
    assert.equal(bad[0].flags, 2);
    const err = JSON.parse(bad[0].data.toString()).error;
    assert.equal(err.code, "invalid_argument");
    assert.match(err.message, /cwd '\/no\/such\/dir' does not exist/);

    // An unparsable timeout header fails the stream the way connect-es does.
    const timeout = parseFrames(Buffer.from(await (await post(startBody("/bin/true", []), { "connect-timeout-ms": "soon" })).arrayBuffer()));
    assert.equal(JSON.parse(timeout.at(-1)!.data.toString()).error.code, "invalid_argument");

    // A client that accepts gzip gets connect-es's compressing pipeline (big frames gzipped).
    // Random output decodes as well as zeros (in JSON its base64 still shrinks, so both are deflated).
    for (const source of ["/dev/zero", "/dev/urandom"]) {
      const gz = await post(startBody("/usr/bin/head", ["-c", "300000", source]), { "connect-accept-encoding": "gzip" });
      assert.equal(gz.headers.get("connect-content-encoding"), "gzip");
      const gzFrames = parseFrames(Buffer.from(await gz.arrayBuffer()));
      let total = 0;
      for (const f of gzFrames.slice(0, -1)) {
        const data = f.flags & 1 ? gunzipSync(f.data) : f.data;
        const ev = JSON.parse(data.toString()).event;
        if (ev.data) total += Buffer.from(ev.data.stdout, "base64").length;
      }
      assert.equal(total, 300000, source);
    }
  } finally {
    await d.stop();
  }
});

// Plain Connect calls (unary, and the framed server streams) are answered on the daemon's own
// fast paths (src/http/fast-unary.ts, fast-stream.ts); everything else goes through connect-node.
// Both must say the same thing: the same call answered on both paths (the fast path is turned
// off by compressing the request) gives the same status, headers and bytes. And the fast paths
// must take exactly the requests they are meant for.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import http from "node:http";
import http2 from "node:http2";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { create, fromBinary, fromJsonString, toBinary, toJsonString, type DescMessage } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouterOptions } from "@connectrpc/connect";
import { Filesystem, StatRequestSchema, StatResponseSchema, ListDirRequestSchema, MakeDirRequestSchema, WatchDirRequestSchema, WatchDirResponseSchema } from "../../../src/envd/gen/filesystem/filesystem_pb.js";
import { ConnectRequestSchema, StartRequestSchema, StartResponseSchema } from "../../../src/envd/gen/process/process_pb.js";
import { createFastUnary, serviceEntry } from "../../../src/envd/http/fast-unary.js";
import { createFastStream } from "../../../src/envd/http/fast-stream.js";
import { CALL_DONE, CLIENT_GONE, callContext } from "../../../src/envd/http/node-call.js";
import { serializedFrames, serviceWithFrames, type FramedMethod } from "../../../src/envd/http/framed-stream.js";
import { createContextValues } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { envelope, h2Exchange, httpExchange, parseEnvelopes, type Answer } from "../helpers/fuzz.js";

let d: Daemon;
let dir: string;
let h2: http2.ClientHttp2Session;
const AUTH = { authorization: `Basic ${Buffer.from("root:").toString("base64")}` };

before(async () => {
  dir = join("/tmp", `envd-fast-paths-${process.pid}`);
  mkdirSync(join(dir, "sub"), { recursive: true });
  writeFileSync(join(dir, "a.txt"), "alpha");
  d = await startDaemon();
  h2 = http2.connect(d.url);
});

after(async () => {
  h2?.close();
  await d?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * What must match between the two paths: status, headers but the date, body bytes. A compressed
 * stream request makes connect-node declare the same compression for the response stream (its
 * frames below compressMinBytes still leave uncompressed): that header is the one difference.
 */
function comparable(a: Answer): { status: number; headers: Record<string, string>; body: string } {
  const { date: _date, "connect-content-encoding": _encoding, ...headers } = a.headers;
  return { status: a.status, headers, body: a.body.toString("latin1") };
}

function exchange(transport: "h1" | "h2", path: string, headers: Record<string, string>, body: Uint8Array): Promise<Answer> {
  return transport === "h1" ? httpExchange(`${d.url}${path}`, { headers: { ...AUTH, ...headers }, body }) : h2Exchange(h2, path, { ...AUTH, ...headers }, body);
}

const UNARY: { name: string; path: string; schema: DescMessage; init: () => object; raw?: () => string }[] = [
  { name: "Stat of a file", path: "/filesystem.Filesystem/Stat", schema: StatRequestSchema, init: () => ({ path: join(dir, "a.txt") }) },
  { name: "Stat of a missing path (not_found)", path: "/filesystem.Filesystem/Stat", schema: StatRequestSchema, init: () => ({ path: join(dir, "nope") }) },
  { name: "ListDir", path: "/filesystem.Filesystem/ListDir", schema: ListDirRequestSchema, init: () => ({ path: dir, depth: 2 }) },
  { name: "MakeDir of an existing dir (already_exists)", path: "/filesystem.Filesystem/MakeDir", schema: MakeDirRequestSchema, init: () => ({ path: join(dir, "sub") }) },
  { name: "Stat with a body that does not parse", path: "/filesystem.Filesystem/Stat", schema: StatRequestSchema, init: () => ({}), raw: () => '{"path": ' },
  { name: "Stat with an unknown field", path: "/filesystem.Filesystem/Stat", schema: StatRequestSchema, init: () => ({}), raw: () => JSON.stringify({ path: join(dir, "a.txt"), bogus: 1 }) },
];

for (const transport of ["h1", "h2"] as const) {
  for (const binary of [false, true]) {
    test(`unary ${transport} ${binary ? "binary" : "JSON"}: the fast path answers as connect-node does`, async () => {
      for (const c of UNARY) {
        if (c.raw && binary) continue;
        const msg = create(c.schema, c.init() as Record<string, unknown>);
        const body = c.raw ? Buffer.from(c.raw()) : binary ? Buffer.from(toBinary(c.schema, msg)) : Buffer.from(toJsonString(c.schema, msg));
        const type = { "content-type": binary ? "application/proto" : "application/json" };
        const fast = await exchange(transport, c.path, type, body);
        const generic = await exchange(transport, c.path, { ...type, "content-encoding": "gzip" }, gzipSync(body));
        assert.deepEqual(comparable(fast), comparable(generic), `${c.name}`);
        assert.ok(fast.status === 200 || /"code":"[a-z_]+"/.test(fast.body.toString()), `${c.name}: ${fast.status} ${fast.body.toString()}`);
      }
    });
  }
}

test("unary: a Stat answered on the fast path carries the entry, for JSON and binary", async () => {
  const path = join(dir, "a.txt");
  const json = await exchange("h1", "/filesystem.Filesystem/Stat", { "content-type": "application/json" }, Buffer.from(JSON.stringify({ path })));
  assert.equal(json.status, 200);
  assert.equal(fromJsonString(StatResponseSchema, json.body.toString()).entry?.size, 5n);
  const bin = await exchange("h2", "/filesystem.Filesystem/Stat", { "content-type": "application/proto" }, toBinary(StatRequestSchema, create(StatRequestSchema, { path })));
  assert.equal(bin.status, 200);
  assert.equal(fromBinary(StatResponseSchema, bin.body).entry?.name, "a.txt");
});

/** The events of a Start answer, pids zeroed (the two calls start two processes). */
function startEvents(a: Answer, binary: boolean): unknown[] {
  return parseEnvelopes(a.body).map(({ flags, data }) => {
    assert.equal(flags & 1, 0, "small frames leave uncompressed");
    if (flags & 2) return { end: JSON.parse(data.toString()) as unknown };
    const m = binary ? fromBinary(StartResponseSchema, data) : fromJsonString(StartResponseSchema, data.toString());
    if (m.event?.event.case === "start") m.event.event.value.pid = 0;
    return JSON.parse(toJsonString(StartResponseSchema, m)) as unknown;
  });
}

for (const transport of ["h1", "h2"] as const) {
  for (const binary of [false, true]) {
    test(`Start ${transport} ${binary ? "binary" : "JSON"}: the fast path streams what connect-node streams`, async () => {
      const req = create(StartRequestSchema, { process: { cmd: "/bin/sh", args: ["-c", "echo out; echo err >&2; exit 3"] } });
      const payload = binary ? Buffer.from(toBinary(StartRequestSchema, req)) : Buffer.from(toJsonString(StartRequestSchema, req));
      const type = { "content-type": `application/connect+${binary ? "proto" : "json"}` };
      const fast = await exchange(transport, "/process.Process/Start", type, envelope(0, payload));
      const generic = await exchange(transport, "/process.Process/Start", { ...type, "connect-content-encoding": "gzip" }, envelope(1, gzipSync(payload)));
      assert.equal(fast.status, 200);
      assert.deepEqual({ ...comparable(fast), body: "" }, { ...comparable(generic), body: "" });
      assert.equal(generic.headers["connect-content-encoding"], "gzip", "the request compression turned the fast path off");
      assert.equal(fast.headers["connect-content-encoding"], undefined);
      const events = startEvents(fast, binary);
      assert.deepEqual(events, startEvents(generic, binary));
      const text = JSON.stringify(events);
      assert.match(text, /"exitCode":3/);
      assert.match(text, new RegExp(`"stdout":"${Buffer.from("out\n").toString("base64")}"`));
      assert.match(text, new RegExp(`"stderr":"${Buffer.from("err\n").toString("base64")}"`));
    });
  }
}

/** A Start or Connect request's payload in the codec asked for. */
function processPayload(binary: boolean, schema: typeof StartRequestSchema | typeof ConnectRequestSchema, init: object): Buffer {
  const msg = create(schema as DescMessage, init as Record<string, unknown>);
  return binary ? Buffer.from(toBinary(schema as DescMessage, msg)) : Buffer.from(toJsonString(schema as DescMessage, msg));
}

for (const [transport, binary] of [["h1", false], ["h2", true]] as const) {
  test(`Start and Connect ${transport} ${binary ? "binary" : "JSON"}: the direct path ends failed calls with connect-node's errors`, async () => {
    const type = { "content-type": `application/connect+${binary ? "proto" : "json"}` };
    const nobody = { authorization: `Basic ${Buffer.from("nobody-here:").toString("base64")}` };
    const cases: [string, string, Buffer, Record<string, string>, string][] = [
      ["an unknown Basic user", "/process.Process/Start", processPayload(binary, StartRequestSchema, { process: { cmd: "/bin/true" } }), nobody, "unauthenticated"],
      ["an empty command", "/process.Process/Start", processPayload(binary, StartRequestSchema, { process: { cmd: "" } }), {}, "invalid_argument"],
      ["a missing working directory", "/process.Process/Start", processPayload(binary, StartRequestSchema, { process: { cmd: "/bin/true", cwd: join(dir, "nope") } }), {}, "invalid_argument"],
      ["a process that is not there", "/process.Process/Connect", processPayload(binary, ConnectRequestSchema, { process: { selector: { case: "pid", value: 999_999 } } }), {}, "not_found"],
    ];
    for (const [name, path, payload, extra, code] of cases) {
      const fast = await exchange(transport, path, { ...type, ...extra }, envelope(0, payload));
      const generic = await exchange(transport, path, { ...type, ...extra, "connect-content-encoding": "gzip" }, envelope(1, gzipSync(payload)));
      assert.equal(fast.headers["connect-content-encoding"], undefined, name);
      assert.deepEqual(comparable(fast), comparable(generic), name);
      const end = JSON.parse(parseEnvelopes(fast.body).at(-1)!.data.toString()) as { error?: { code: string } };
      assert.equal(end.error?.code, code, `${name}: ${fast.body.toString()}`);
    }
  });
}

test("Start on the direct path: Connect-Timeout-Ms ends the stream with deadline_exceeded, as on connect-node's path", async () => {
  const payload = processPayload(false, StartRequestSchema, { process: { cmd: "/bin/sleep", args: ["5"] } });
  const type = { "content-type": "application/connect+json", "connect-timeout-ms": "300" };
  const t0 = performance.now();
  const [fast, generic] = await Promise.all([
    httpExchange(`${d.url}/process.Process/Start`, { headers: { ...AUTH, ...type }, body: envelope(0, payload) }, 2000),
    httpExchange(`${d.url}/process.Process/Start`, { headers: { ...AUTH, ...type, "connect-content-encoding": "gzip" }, body: envelope(1, gzipSync(payload)) }, 2000),
  ].map((p) => p.then((a) => ({ a, ms: performance.now() - t0 }))));
  for (const { a, ms } of [fast, generic]) {
    const events = startEvents(a, false);
    assert.deepEqual(events.at(-1), { end: { error: { code: "deadline_exceeded", message: "the operation timed out" } } });
    assert.ok(ms < 3000, `ended after ${ms.toFixed(0)} ms, not with the process`);
  }
  assert.deepEqual(startEvents(fast.a, false), startEvents(generic.a, false));
});

for (const transport of ["h1", "h2"] as const) {
  for (const binary of [false, true]) {
    test(`WatchDir ${transport} ${binary ? "binary" : "JSON"}: the fast path answers as connect-node does, and streams events`, async () => {
      const type = { "content-type": `application/connect+${binary ? "proto" : "json"}` };
      const payload = (path: string) => {
        const req = create(WatchDirRequestSchema, { path, recursive: true });
        return binary ? Buffer.from(toBinary(WatchDirRequestSchema, req)) : Buffer.from(toJsonString(WatchDirRequestSchema, req));
      };
      // Watches that fail at once end their streams: the same error on both paths.
      for (const path of [join(dir, "missing"), join(dir, "a.txt")]) {
        const fast = await exchange(transport, "/filesystem.Filesystem/WatchDir", type, envelope(0, payload(path)));
        const generic = await exchange(transport, "/filesystem.Filesystem/WatchDir", { ...type, "connect-content-encoding": "gzip" }, envelope(1, gzipSync(payload(path))));
        assert.equal(fast.headers["connect-content-encoding"], undefined);
        assert.deepEqual(comparable(fast), comparable(generic), path);
        const end = JSON.parse(parseEnvelopes(fast.body).at(-1)!.data.toString()) as { error?: { code: string } };
        assert.ok(end.error?.code, `${path}: ${fast.body.toString()}`);
      }
      // A live watch on the fast path: the start event, then the file made after it.
      const events = await liveWatch(transport, type, envelope(0, payload(dir)), binary, `w-${transport}-${binary}`);
      assert.deepEqual(events.slice(0, 2), ["start", `filesystem:w-${transport}-${binary}`]);
    });
  }
}

test("a service registered with serializedFrames has its server streams on the stream fast path, and only those", () => {
  const calls = new Map<string, FramedMethod>();
  const router = { handlers: [] as unknown[] } as unknown as Parameters<typeof serviceWithFrames>[0];
  serviceWithFrames(router, OPTIONS, Filesystem, {}, serializedFrames, calls);
  assert.deepEqual([...calls.keys()], ["/filesystem.Filesystem/WatchDir"]);
});

/** Opens a WatchDir stream, creates `name` in the watched dir once it started, returns the event kinds seen until that file's. */
function liveWatch(transport: "h1" | "h2", type: Record<string, string>, body: Buffer, binary: boolean, name: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const seen: string[] = [];
    let pending = Buffer.alloc(0);
    let close = (): void => undefined;
    const onData = (chunk: Buffer): void => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
        const data = pending.subarray(5, 5 + pending.readUInt32BE(1));
        const flags = pending[0];
        pending = pending.subarray(5 + data.length);
        if (flags & 2) return reject(new Error(`stream ended: ${data.toString()}`));
        const m = binary ? fromBinary(WatchDirResponseSchema, data) : fromJsonString(WatchDirResponseSchema, data.toString());
        const ev = m.event;
        if (ev.case === "start") writeFileSync(join(dir, name), "x");
        if (ev.case === "keepalive") continue;
        seen.push(ev.case === "filesystem" ? `filesystem:${ev.value.name}` : String(ev.case));
        if (ev.case === "filesystem" && ev.value.name === name) {
          close();
          resolve(seen);
        }
      }
    };
    if (transport === "h2") {
      const s = h2.request({ ":method": "POST", ":path": "/filesystem.Filesystem/WatchDir", ...AUTH, ...type });
      s.on("data", onData).on("error", reject);
      s.end(body);
      close = () => s.close();
    } else {
      const r = http.request(`${d.url}/filesystem.Filesystem/WatchDir`, { method: "POST", headers: { ...AUTH, ...type } }, (res) => res.on("data", onData));
      r.on("error", (e) => (seen.length ? undefined : reject(e)));
      r.end(body);
      close = () => r.destroy();
    }
  });
}

test("Start: a broken request envelope ends the stream with connect-es's own error on both paths", async () => {
  const payload = Buffer.from(toJsonString(StartRequestSchema, create(StartRequestSchema, { process: { cmd: "/bin/true" } })));
  const type = { "content-type": "application/connect+json" };
  const cases: [string, Buffer][] = [
    ["length longer than the body", envelope(0, payload, payload.length + 10)],
    ["two messages", Buffer.concat([envelope(0, payload), envelope(0, payload)])],
    ["a payload that does not parse", envelope(0, "{not json")],
    ["no message at all", Buffer.alloc(0)],
  ];
  for (const [name, body] of cases) {
    const fast = await exchange("h1", "/process.Process/Start", type, body);
    const generic = await exchange("h1", "/process.Process/Start", { ...type, "connect-content-encoding": "gzip" }, body);
    assert.deepEqual(comparable(fast), comparable(generic), name);
    const last = parseEnvelopes(fast.body).at(-1);
    assert.ok(last && last.flags & 2, `${name}: ends with an end-of-stream frame`);
    const end = JSON.parse(last.data.toString()) as { error?: { code: string } };
    assert.ok(end.error?.code, `${name}: the end-of-stream frame carries an error (${last.data.toString()})`);
  }
});

test("Start: the request body may arrive after the headers (HTTP/1.1)", async () => {
  const payload = envelope(0, JSON.stringify({ process: { cmd: "/bin/echo", args: ["late"] } }));
  const body = await new Promise<Buffer>((resolve, reject) => {
    const req = http.request(`${d.url}/process.Process/Start`, { method: "POST", headers: { ...AUTH, "content-type": "application/connect+json", "content-length": payload.length } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c)).on("end", () => resolve(Buffer.concat(chunks)));
    });
    req.on("error", reject);
    req.flushHeaders();
    req.write(payload.subarray(0, 3));
    setTimeout(() => req.end(payload.subarray(3)), 150);
  });
  assert.match(JSON.stringify(parseEnvelopes(body).map((e) => e.data.toString())), new RegExp(Buffer.from("late\n").toString("base64")));
});

/** A fast path on a bare Node server, everything it declines answered 599 ("generic"). */
async function bareServer(handle: (req: http.IncomingMessage, res: http.ServerResponse) => boolean): Promise<{ url: string; close(): void }> {
  const server = http.createServer((req, res) => {
    if (handle(req, res)) return;
    req.resume();
    res.writeHead(599).end("generic");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, close: () => server.close() };
}

/** A POST whose body goes out in chunks, without a Content-Length. */
function chunkedPost(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "POST", headers }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (c: string) => (text += c)).on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on("error", reject);
    req.write(body.slice(0, 10));
    req.end(body.slice(10));
  });
}

// As the daemon's router options: the compressions connect-node offers, a small message limit.
const OPTIONS: ConnectRouterOptions = { readMaxBytes: 1024, acceptCompression: [compressionGzip, compressionBrotli] };

test("the unary fast path takes plain Connect unary calls only", async () => {
  const seen: string[] = [];
  const fast = createFastUnary(
    OPTIONS,
    [
    serviceEntry(Filesystem, {
      stat(req) {
        seen.push(req.path);
        if (req.path === "fail") throw new ConnectError("no such thing", Code.NotFound);
        return { entry: { name: req.path } };
      },
    }),
    ],
    () => createContextValues(),
  );
  const s = await bareServer((req, res) => fast(req, res));
  try {
    const post = (path: string, headers: Record<string, string>, body: string | Buffer) => httpExchange(`${s.url}${path}`, { headers, body: Buffer.from(body) });
    const json = { "content-type": "application/json" };
    const ok = await post("/filesystem.Filesystem/Stat", json, '{"path":"x"}');
    assert.equal(ok.status, 200);
    assert.equal(ok.headers["content-type"], "application/json");
    assert.deepEqual(JSON.parse(ok.body.toString()), { entry: { name: "x" } });
    const err = await post("/filesystem.Filesystem/Stat", json, '{"path":"fail"}');
    assert.equal(err.status, 404);
    assert.deepEqual(JSON.parse(err.body.toString()), { code: "not_found", message: "no such thing" });
    const big = await chunkedPost(`${s.url}/filesystem.Filesystem/Stat`, json, `{"path":"${"y".repeat(2000)}"}`);
    assert.equal(big.status, 429);
    assert.equal((JSON.parse(big.body) as { code: string }).code, "resource_exhausted");
    assert.deepEqual(seen, ["x", "fail"]);
    // Declined: compressed bodies, other protocols and media types, GET, unknown methods, too long
    // a promised body, a malformed timeout.
    const declined: [string, Record<string, string>, string][] = [
      ["/filesystem.Filesystem/Stat", { ...json, "content-encoding": "gzip" }, "x"],
      ["/filesystem.Filesystem/Stat", { "content-type": "application/grpc" }, "x"],
      ["/filesystem.Filesystem/Stat", { "content-type": "application/connect+json" }, "x"],
      ["/filesystem.Filesystem/Stat", { "content-type": "text/plain" }, "x"],
      ["/filesystem.Filesystem/Nope", json, "{}"],
      ["/filesystem.Filesystem/WatchDir", json, "{}"],
      ["/filesystem.Filesystem/Stat", { ...json, "connect-timeout-ms": "soon" }, "{}"],
      ["/filesystem.Filesystem/Stat", { ...json, "content-length": "5000" }, "{}".padEnd(5000)],
    ];
    for (const [path, headers, body] of declined) assert.equal((await post(path, headers, body)).status, 599, `${path} ${JSON.stringify(headers)}`);
    const get = await httpExchange(`${s.url}/filesystem.Filesystem/Stat`, { method: "GET" });
    assert.equal(get.status, 599);
    assert.deepEqual(seen, ["x", "fail"]);
  } finally {
    s.close();
  }
});

test("the stream fast path takes plain Connect streams of framed methods only, and parses one envelope itself", async () => {
  const used: string[] = [];
  const frame = (text: string) => (async function* () {
    yield envelope(2, text);
  })();
  const method = {
    spec: { method: { name: "Start" } },
    call: () => (used.push("envelope transforms"), frame("{}")),
    callWithPayload: (_c: unknown, _b: boolean, payload: Uint8Array) => (used.push(`payload ${Buffer.from(payload).toString()}`), frame("{}")),
  } as unknown as FramedMethod;
  const fast = createFastStream(OPTIONS, new Map([["/process.Process/Start", method]]), () => createContextValues(), () => undefined);
  const s = await bareServer((req, res) => fast(req, res));
  try {
    const post = (headers: Record<string, string>, body: Buffer, path = "/process.Process/Start") => httpExchange(`${s.url}${path}`, { headers, body });
    const type = { "content-type": "application/connect+json" };
    const one = await post(type, envelope(0, "{}"));
    assert.equal(one.status, 200);
    assert.equal(one.headers["content-type"], "application/connect+json");
    assert.deepEqual(parseEnvelopes(one.body), [{ flags: 2, data: Buffer.from("{}") }]);
    await post(type, Buffer.concat([envelope(0, "{}"), envelope(0, "{}")]));
    await post(type, envelope(1, "{}"));
    await post(type, envelope(0, "x".repeat(2000)));
    assert.deepEqual(used, ["payload {}", "envelope transforms", "envelope transforms", "envelope transforms"]);
    const declined: [Record<string, string>, string?][] = [
      [{ ...type, "connect-content-encoding": "gzip" }],
      [{ ...type, "connect-accept-encoding": "gzip" }],
      [{ "content-type": "application/json" }],
      [{ "content-type": "application/grpc+proto" }],
      [{ ...type, "connect-timeout-ms": "-1" }],
      [type, "/process.Process/List"],
    ];
    for (const [headers, path] of declined) assert.equal((await post(headers, envelope(0, "{}"), path)).status, 599, JSON.stringify(headers));
    assert.equal(used.length, 4);
  } finally {
    s.close();
  }
});

test("the direct path: one plain envelope goes to the direct implementation, which sees the header, the user and the client leaving", async () => {
  const used: string[] = [];
  let signal: AbortSignal | undefined;
  let liveClosed: () => void = () => undefined;
  let lastClosed = false;
  const liveFinallyRan = new Promise<void>((r) => (liveClosed = r));
  const method = {
    spec: { method: { name: "Start" } },
    call: () => (used.push("envelope transforms"), (async function* () {
      yield envelope(2, "{}");
    })()),
    callWithPayload: () => {
      throw new Error("the direct path must be taken");
    },
    direct: {
      parse: (binary: boolean, payload: Uint8Array) => ({ binary, text: Buffer.from(payload).toString() }),
      frame: (m: unknown) => ({ pieces: [envelope(0, JSON.stringify(m))], last: (m as { last?: boolean }).last }),
      end: (e: ConnectError | undefined) => envelope(2, e ? JSON.stringify({ error: { code: Code[e.code] } }) : "{}"),
      impl: (message: unknown, call: { signal: AbortSignal; header(n: string): string | null; user: unknown }) => (async function* () {
        signal = call.signal;
        used.push(`direct ${JSON.stringify(message)} ${call.header("X-Probe")} ${String(call.user)}`);
        try {
          yield { first: true };
          if ((message as { text: string }).text === "fail") throw new ConnectError("no such thing", Code.NotFound);
          if ((message as { text: string }).text === "end") return;
          if ((message as { text: string }).text === "last") {
            yield { last: true };
            yield { after: "the last" };
          }
          await new Promise((r) => call.signal.addEventListener("abort", r));
        } finally {
          if ((message as { text: string }).text === "wait") liveClosed();
          if ((message as { text: string }).text === "last") lastClosed = true;
        }
      })(),
    },
  } as unknown as FramedMethod;
  const fast = createFastStream(OPTIONS, new Map([["/process.Process/Start", method]]), () => createContextValues(), (auth) => (auth ? `user of ${auth}` : undefined) as never);
  const s = await bareServer((req, res) => fast(req, res));
  try {
    const type = { "content-type": "application/connect+json", "x-probe": "p1", authorization: "b" };
    const ended = await httpExchange(`${s.url}/process.Process/Start`, { headers: type, body: envelope(0, "end") });
    assert.deepEqual(parseEnvelopes(ended.body).map((e) => [e.flags, e.data.toString()]), [[0, JSON.stringify({ first: true })], [2, "{}"]]);
    const failed = await httpExchange(`${s.url}/process.Process/Start`, { headers: type, body: envelope(0, "fail") });
    assert.equal(failed.status, 200);
    assert.deepEqual(parseEnvelopes(failed.body).map((e) => e.data.toString()).at(-1), JSON.stringify({ error: { code: "NotFound" } }));
    assert.deepEqual(used.slice(0, 2), ['direct {"binary":false,"text":"end"} p1 user of b', 'direct {"binary":false,"text":"fail"} p1 user of b']);
    // A frame marked last ends the answer at once; the implementation's iterator is closed.
    const last = await httpExchange(`${s.url}/process.Process/Start`, { headers: type, body: envelope(0, "last") });
    assert.deepEqual(parseEnvelopes(last.body).map((e) => [e.flags, e.data.toString()]), [[0, JSON.stringify({ first: true })], [0, JSON.stringify({ last: true })], [2, "{}"]]);
    assert.equal(lastClosed, true, "the iterator was closed");
    // Two envelopes: connect-es's transforms word the error, as before.
    await httpExchange(`${s.url}/process.Process/Start`, { headers: type, body: Buffer.concat([envelope(0, "a"), envelope(0, "b")]) });
    assert.equal(used.at(-1), "envelope transforms");
    // A live stream whose client leaves: the signal aborts and the implementation's finally runs.
    const live = await httpExchange(`${s.url}/process.Process/Start`, { headers: type, body: envelope(0, "wait") });
    assert.equal(live.open, true, "the stream was still open when the client left");
    await liveFinallyRan;
    assert.equal(signal?.aborted, true);
    assert.equal(signal?.reason, CLIENT_GONE);
  } finally {
    s.close();
  }
});

test("callContext: one shutdown listener for all calls; shutdown aborts the live ones; an ended call aborts its signal only for listeners", () => {
  const shutdown = new AbortController();
  const spec = { method: Filesystem.method.stat };
  const make = () => callContext(spec, new Headers(), "/filesystem.Filesystem/Stat", undefined, shutdown.signal, createContextValues(), "application/json");
  const calls = Array.from({ length: 5 }, make);
  assert.equal(getEventListeners(shutdown.signal, "abort").length, 1);
  // Ended with nobody listening: the signal stays as it was (no event built for nobody).
  calls[0].abort();
  assert.equal(calls[0].signal.aborted, false);
  // Ended with a listener: it hears CALL_DONE.
  let heard: unknown;
  calls[1].signal.addEventListener("abort", () => (heard = calls[1].signal.reason));
  calls[1].abort();
  assert.equal(heard, CALL_DONE);
  // An error ends the call with its reason even without listeners.
  const failure = new Error("boom");
  calls[2].abort(failure);
  assert.equal(calls[2].signal.reason, failure);
  const reason = new Error("shutting down");
  shutdown.abort(reason);
  assert.equal(calls[0].signal.aborted, false, "an ended call is no longer aborted by the shutdown");
  assert.equal(calls[3].signal.reason, reason);
  assert.equal(calls[4].signal.reason, reason);
  // A call made after the shutdown starts aborted.
  assert.equal(make().signal.reason, reason);
});

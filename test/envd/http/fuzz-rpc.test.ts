// Fuzzes every RPC of both services in every framing the daemon speaks (Connect JSON and
// binary over HTTP/1.1, gRPC over h2c, gRPC-Web): the seed corpus, truncations of valid
// messages, seeded random bytes, lying and oversize envelopes, wrong content types, invalid
// UTF-8, NUL bytes and deeply nested JSON. Every answer must be a clear status or Connect
// code, and the daemon must stay healthy. ENVD_SOAK=1 runs many more seeds.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import net from "node:net";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { delimiter, join } from "node:path";
import { create, fromBinary, fromJsonString, toBinary, toJsonString, type DescMethod } from "@bufbuild/protobuf";
import { Filesystem } from "../../../src/envd/gen/filesystem/filesystem_pb.js";
import { Process, Signal } from "../../../src/envd/gen/process/process_pb.js";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { clients } from "../helpers/clients.js";
import {
  assertClear, assertHealthy, budget, pool, CONNECT_CODES, corpusJson, envelope, h2Exchange, httpExchange, parseEnvelopes, Rng, seeds, type Answer,
} from "../helpers/fuzz.js";

const MAX_MSG = 1024 * 1024;
let d: Daemon;
let scratch: string;
const tally = new Map<string, number>();
const count = (k: string) => tally.set(k, (tally.get(k) ?? 0) + 1);
/** Distinct messages of internal/unknown answers, printed at the end for review. */
const internals = new Set<string>();
const noteInternal = (code: unknown, message: unknown) => {
  if (code === "internal" || code === "unknown") internals.add(`${String(code)}: ${String(message).replace(/\/tmp\/envd-fuzz-rpc-\d+/g, "$SCRATCH").slice(0, 90)}`);
};

before(async () => {
  scratch = join("/tmp", `envd-fuzz-rpc-${process.pid}`);
  mkdirSync(scratch, { recursive: true });
  // The default workdir is the scratch dir, so an empty path (Remove {}) can only hit scratch.
  d = await startDaemon({ args: ["--default-workdir", scratch, "--max-message-bytes", String(MAX_MSG)] });
});

after(async () => {
  await d?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

const METHODS: DescMethod[] = [...Filesystem.methods, ...Process.methods];

/** A valid request for each RPC, naming only scratch paths and pids envd never started. */
function sample(m: DescMethod): Uint8Array {
  const p = { selector: { case: "pid" as const, value: 999_999 } };
  const inits: Record<string, object> = {
    Stat: { path: scratch },
    MakeDir: { path: `${scratch}/mk` },
    Move: { source: `${scratch}/a`, destination: `${scratch}/b` },
    ListDir: { path: scratch, depth: 2 },
    Remove: { path: `${scratch}/rm` },
    WatchDir: { path: scratch },
    CreateWatcher: { path: scratch },
    GetWatcherEvents: { watcherId: "wnope" },
    RemoveWatcher: { watcherId: "wnope" },
    List: {},
    Connect: { process: p },
    Start: { process: { cmd: "/bin/true", args: [] } },
    Update: { process: p },
    StreamInput: { event: { case: "start", value: { process: p } } },
    SendInput: { process: p, input: { input: { case: "stdin", value: Buffer.from("x") } } },
    SendSignal: { process: p, signal: Signal.SIGTERM },
    CloseStdin: { process: p },
  };
  return toBinary(m.input, create(m.input, (inits[m.name] ?? {}) as Record<string, unknown>));
}

function sampleJson(m: DescMethod): string {
  return toJsonString(m.input, fromBinary(m.input, sample(m)));
}

// RPCs whose effect depends on a path or command: only sent what cannot reach outside scratch.
const GUARDED = new Set(["Remove", "Move", "MakeDir", "ListDir", "WatchDir", "CreateWatcher", "Start"]);
const SAFE_CMDS = new Set(["/bin/true", "true", "/bin/echo", "echo"]);

function inScratch(p: string): boolean {
  if (p === "") return true; // the default workdir, i.e. scratch
  return (p === scratch || p.startsWith(scratch + "/")) && !p.split("/").includes("..");
}

function onPath(cmd: string): boolean {
  if (cmd.includes("/")) return existsSync(cmd);
  return (process.env.PATH ?? "").split(delimiter).some((dir) => dir && existsSync(join(dir, cmd)));
}

/** Whether the daemon may receive this payload: it fails to decode, or it only names scratch / harmless commands. */
function safe(m: DescMethod, payload: Uint8Array, format: "json" | "binary"): boolean {
  if (!GUARDED.has(m.name)) return true;
  let msg: Record<string, unknown>;
  try {
    msg = (format === "json"
      ? fromJsonString(m.input, Buffer.from(payload).toString("utf8"), { ignoreUnknownFields: true })
      : fromBinary(m.input, payload)) as unknown as Record<string, unknown>;
  } catch {
    return true;
  }
  if (m.name === "Start") {
    const cmd = (msg.process as { cmd?: string } | undefined)?.cmd ?? "";
    return cmd === "" || SAFE_CMDS.has(cmd) || !onPath(cmd);
  }
  return ["path", "source", "destination"].every((k) => typeof msg[k] !== "string" || inScratch(msg[k] as string));
}

const streaming = (m: DescMethod) => m.methodKind !== "unary";
const url = (m: DescMethod) => `${d.url}/${m.parent.typeName}/${m.name}`;

/** Checks a Connect (JSON or binary) answer over HTTP/1.1. */
function checkConnect(m: DescMethod, a: Answer, what: string): void {
  const label = `${m.name} ${what}`;
  if (a.status !== 200) {
    const json = assertClear(a, label) as { code?: unknown; message?: unknown } | undefined;
    if ((a.headers["content-type"] ?? "").includes("json") && json && typeof json === "object") {
      assert.ok(CONNECT_CODES.has(String(json.code)), `${label}: unknown code in ${a.body.toString().slice(0, 200)}`);
      noteInternal(json.code, json.message);
      count(`${a.status} ${json.code}`);
    } else count(`${a.status}`);
    return;
  }
  if ((a.headers["content-type"] ?? "").startsWith("application/grpc")) {
    // gRPC spoken over HTTP/1.1: its status travels in HTTP trailers, which fetch cannot read.
    count("200 grpc over HTTP/1.1");
    return;
  }
  if (!streaming(m)) {
    count("200 ok");
    return;
  }
  const frames = parseEnvelopes(a.body);
  if (a.open) {
    assert.ok(frames.length > 0 && frames.every((f) => f.flags === 0), `${label}: open stream without messages`);
    count("200 open stream");
    return;
  }
  const last = frames.at(-1);
  assert.ok(last && last.flags === 2, `${label}: stream ended without an end-stream envelope: ${a.body.toString("latin1").slice(0, 200)}`);
  const end = JSON.parse(last.data.toString()) as { error?: { code?: string; message?: string } };
  if (end.error) {
    assert.ok(CONNECT_CODES.has(String(end.error.code)), `${label}: bad end-stream code ${last.data}`);
    assert.ok(end.error.message && end.error.message !== "internal error", `${label}: unclear end-stream error ${last.data}`);
    noteInternal(end.error.code, end.error.message);
    count(`200 end ${end.error.code}`);
  } else count("200 end ok");
}

/** Checks a gRPC answer over h2c: HTTP 200 and a numeric grpc-status (with a message when non-zero). */
function checkGrpc(m: DescMethod, a: Answer, what: string): void {
  const label = `${m.name} grpc ${what}`;
  if (a.open) {
    count("grpc open stream");
    return;
  }
  if (a.status !== 200) {
    assertClear(a, `${label} (${a.reset ?? "no reset"})`);
    count(`grpc http ${a.status}`);
    return;
  }
  const status = a.trailers["grpc-status"] ?? a.headers["grpc-status"];
  assert.match(String(status), /^(?:[0-9]|1[0-6])$/, `${label}: grpc-status ${status}`);
  if (status !== "0") {
    const msg = decodeURIComponent(a.trailers["grpc-message"] ?? a.headers["grpc-message"] ?? "");
    assert.ok(msg && msg !== "internal error", `${label}: grpc-status ${status} with message '${msg}'`);
  }
  count(`grpc ${status}`);
}

function checkGrpcWeb(m: DescMethod, a: Answer, what: string): void {
  const label = `${m.name} grpc-web ${what}`;
  if (a.status !== 200 || a.open) {
    if (!a.open) assertClear(a, label);
    count(a.open ? "grpc-web open" : `grpc-web http ${a.status}`);
    return;
  }
  const trailer = parseEnvelopes(a.body).find((f) => f.flags & 0x80)?.data.toString() ?? "";
  const status = /grpc-status:\s*(\d+)/i.exec(trailer)?.[1] ?? a.headers["grpc-status"];
  assert.match(String(status), /^(?:[0-9]|1[0-6])$/, `${label}: grpc-status ${status} (${a.body.toString("latin1").slice(0, 120)})`);
  count(`grpc-web ${status}`);
}

/** Sends one Connect request over HTTP/1.1 (if safe) and checks the answer. */
async function connectCase(m: DescMethod, format: "json" | "binary", payload: Uint8Array, what: string, opts: { contentType?: string | null; frame?: Uint8Array } = {}): Promise<void> {
  if (!safe(m, payload, format)) {
    count("skipped (unsafe)");
    return;
  }
  const ct =
    opts.contentType !== undefined
      ? opts.contentType
      : streaming(m)
        ? `application/connect+${format === "json" ? "json" : "proto"}`
        : format === "json" ? "application/json" : "application/proto";
  const body = opts.frame ?? (streaming(m) ? envelope(0, Buffer.from(payload)) : payload);
  const headers: Record<string, string> = { "connect-protocol-version": "1" };
  if (ct !== null) headers["content-type"] = ct;
  const a = await httpExchange(url(m), { headers, body }).catch((err: Error) => {
    throw new Error(`${m.name} ${format} ${what}: ${err.message}`);
  });
  checkConnect(m, a, `${format} ${what}`);
}

test("corpus bodies, invalid UTF-8 and NUL bytes: every RPC answers with a Connect code (JSON)", async () => {
  const corpus = corpusJson<{ bodies: string[]; hexBodies: string[] }>("rpc-json.json");
  const bodies = [
    ...corpus.bodies.map((b) => Buffer.from(b.replaceAll("$SCRATCH", scratch))),
    ...corpus.hexBodies.map((h) => Buffer.from(Buffer.from(h, "hex").toString("latin1").replaceAll("$SCRATCH", scratch), "latin1")),
  ];
  await pool(METHODS, 6, async (m) => {
    mkdirSync(scratch, { recursive: true });
    for (const [i, body] of bodies.entries()) await connectCase(m, "json", body, `corpus #${i}`);
  });
  await assertHealthy(d, "after the JSON corpus");
});

test("truncated, lying, oversize and compressed-flag envelopes; wrong content types", async () => {
  await pool(METHODS, 4, async (m) => {
    mkdirSync(scratch, { recursive: true });
    const bin = sample(m);
    const json = Buffer.from(sampleJson(m));
    // Every truncation of the valid message, in both formats.
    for (const [format, full] of [["binary", bin], ["json", json]] as const) {
      const cuts = new Set([0, 1, Math.floor(full.length / 2), full.length - 1].filter((n) => n >= 0 && n < full.length));
      for (const n of cuts) await connectCase(m, format, full.subarray(0, n), `truncated to ${n}`);
    }
    const payload = streaming(m) ? json : bin;
    const fmt = streaming(m) ? "json" : "binary";
    if (streaming(m)) {
      const frames: [string, Buffer][] = [
        ["envelope claims more than sent", envelope(0, json, json.length + 100)],
        ["envelope claims 4 GiB", envelope(0, json, 0xffffffff)],
        ["envelope over --max-message-bytes", envelope(0, Buffer.alloc(MAX_MSG + 1, 0x20))],
        ["half a header", envelope(0, json).subarray(0, 3)],
        ["compressed flag without encoding", envelope(1, json)],
        ["end-stream flag from the client", envelope(2, json)],
        ["unknown flag bits", envelope(0x7c, json)],
        ["two envelopes on a server stream", Buffer.concat([envelope(0, json), envelope(0, json)])],
        ["trailing garbage", Buffer.concat([envelope(0, json), Buffer.from([1, 2, 3])])],
        ["empty body", Buffer.alloc(0)],
      ];
      for (const [what, frame] of frames) await connectCase(m, "json", json, what, { frame });
    } else {
      await connectCase(m, "binary", Buffer.alloc(MAX_MSG + 1, 0), "body over --max-message-bytes");
      await connectCase(m, "json", Buffer.from(JSON.stringify({ path: "x".repeat(MAX_MSG) })), "string over --max-message-bytes");
    }
    for (const ct of [null, "text/plain", "application/xml", "application/json; charset=latin1", "application/grpc", "application/connect+json", "application/json", "multipart/form-data; boundary=x"]) {
      await connectCase(m, fmt, payload, `content-type ${ct}`, { contentType: ct });
    }
  });
  await assertHealthy(d, "after framing faults");
});

test("deeply nested JSON and huge field values", async () => {
  const depth = budget(20_000, 200_000);
  const deep = [
    `{"bogus":${"[".repeat(depth)}${"]".repeat(depth)}}`,
    `{"bogus":${'{"a":'.repeat(depth)}1${"}".repeat(depth)}}`,
    `${"[".repeat(depth)}${"]".repeat(depth)}`,
    `{"process":{"x":${"[".repeat(depth)}${"]".repeat(depth)}}}`,
    `{"process":${'{"process":'.repeat(depth)}{}${"}".repeat(depth)}}`,
    `{"path":"${scratch}/${"é".repeat(200_000)}"}`,
  ];
  await pool(METHODS, 4, async (m) => {
    for (const [i, body] of deep.entries()) await connectCase(m, "json", Buffer.from(body), `deep #${i}`);
  });
  await assertHealthy(d, "after deep JSON");
});

test("seeded random payloads and byte mutations of valid messages (Connect JSON and binary)", async () => {
  const list = seeds(budget(6, 64));
  await pool(list, 4, async (seed) => {
    const rng = new Rng(seed);
    for (const m of METHODS) {
      mkdirSync(scratch, { recursive: true });
      const random = rng.bytes(rng.int(64));
      await connectCase(m, "binary", random, `seed ${seed} random ${random.length}`);
      const bin = Buffer.from(sample(m));
      const mutated = Buffer.from(bin);
      for (let k = 0; k < 1 + rng.int(3) && mutated.length; k++) mutated[rng.int(mutated.length)] = rng.int(256);
      await connectCase(m, "binary", mutated, `seed ${seed} mutated binary`);
      const json = Buffer.from(sampleJson(m));
      for (let k = 0; k < 1 + rng.int(3) && json.length; k++) json[rng.int(json.length)] = rng.pick([0, 0x22, 0x5c, 0x7b, 0x7d, 0xff, 0xc3, rng.int(256)]);
      await connectCase(m, "json", json, `seed ${seed} mutated json`);
    }
  });
  await assertHealthy(d, "after random payloads");
});

test("gRPC over h2c and gRPC-Web: random, truncated and oversize frames", async () => {
  // Node counts the unsent bodies of streams the server reset against the client session's memory.
  const session = http2.connect(d.url, { maxSessionMemory: 256 });
  session.on("error", () => undefined);
  try {
    const list = seeds(budget(3, 32));
    for (const m of METHODS) {
      mkdirSync(scratch, { recursive: true });
      const bin = Buffer.from(sample(m));
      const cases: [string, Buffer, Uint8Array][] = [
        ["valid", envelope(0, bin), bin],
        ["truncated envelope", envelope(0, bin).subarray(0, 4 + Math.ceil(bin.length / 2)), bin.subarray(0, Math.ceil(bin.length / 2))],
        ["length lies", envelope(0, bin, bin.length + 7), bin],
        ["compressed flag", envelope(1, bin), bin],
        ["over max", envelope(0, Buffer.alloc(MAX_MSG + 1)), Buffer.alloc(0)],
        ["4 GiB claim", envelope(0, bin, 0xffffffff), bin],
        ["empty", Buffer.alloc(0), Buffer.alloc(0)],
      ];
      for (const seed of list) {
        const r = new Rng(seed).bytes(1 + (seed % 48));
        cases.push([`seed ${seed}`, envelope(0, r), r]);
      }
      for (const [what, frame, payload] of cases) {
        if (!safe(m, payload, "binary")) continue;
        const label = (err: Error) => new Error(`${m.name} ${what}: ${err.message}`);
        const a = await h2Exchange(session, `/${m.parent.typeName}/${m.name}`, { "content-type": "application/grpc", te: "trailers" }, frame).catch((e: Error) => {
          throw label(e);
        });
        checkGrpc(m, a, what);
        const w = await httpExchange(url(m), { headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1" }, body: frame }).catch((e: Error) => {
          throw label(e);
        });
        checkGrpcWeb(m, w, what);
      }
    }
  } finally {
    session.close();
  }
  await assertHealthy(d, "after gRPC fuzz");
});

test("a rejected oversize message does not wedge its connection (HTTP/1.1 keep-alive, h2c session)", async () => {
  // HTTP/1.1: one socket, an oversize Connect request, then a valid one behind it.
  const big = envelope(0, Buffer.alloc(MAX_MSG + 1, 0x20));
  const post = (path: string, ct: string, body: Buffer) =>
    Buffer.concat([Buffer.from(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${ct}\r\nContent-Length: ${body.length}\r\n\r\n`), body]);
  const answers = await new Promise<string>((resolve) => {
    const s = net.connect(d.port, "127.0.0.1");
    let got = "";
    const timer = setTimeout(() => (s.destroy(), resolve(got)), 5000);
    s.on("data", (c: Buffer) => {
      got += c.toString("latin1");
      const second = got.split("HTTP/1.1 ")[2];
      if (second && /\r\n\r\n\{.*\}$/s.test(second)) (clearTimeout(timer), s.destroy(), resolve(got));
    });
    s.on("error", () => undefined);
    s.write(Buffer.concat([post("/process.Process/Connect", "application/connect+json", big), post("/process.Process/List", "application/json", Buffer.from("{}"))]));
  });
  assert.match(answers, /resource_exhausted/, "the oversize message is refused");
  const second = answers.split("HTTP/1.1 ")[2] ?? "";
  assert.match(second, /^200 OK[^]*content-type: application\/json[^]*\r\n\r\n\{/i, `the next request on the connection is answered: ${answers.slice(-300)}`);
  // h2c: the refused stream's unread data must not hold the session's flow-control window.
  const session = http2.connect(d.url, { maxSessionMemory: 256 });
  session.on("error", () => undefined);
  try {
    for (let i = 0; i < 3; i++) {
      const a = await h2Exchange(session, "/process.Process/List", { "content-type": "application/grpc", te: "trailers" }, envelope(0, Buffer.alloc(MAX_MSG + 1)), 3000);
      assert.equal(a.trailers["grpc-status"], "8", `oversize #${i}: resource_exhausted`);
      assert.equal(a.open, false, `oversize #${i}: the stream is closed once answered`);
    }
    const ok = await h2Exchange(session, "/process.Process/List", { "content-type": "application/grpc", te: "trailers" }, envelope(0, Buffer.alloc(0)), 3000);
    assert.equal(ok.trailers["grpc-status"], "0", "a later stream of the same session is served");
  } finally {
    session.close();
  }
});

test("afterwards: processes the fuzz started are gone or killable, nothing escaped scratch, daemon healthy", async (t) => {
  const c = clients(d.url);
  for (const p of (await c.proc.json.list({})).processes) {
    await c.proc.json.sendSignal({ process: { selector: { case: "pid", value: p.pid } }, signal: Signal.SIGKILL }).catch(() => undefined);
  }
  assert.ok(existsSync("/tmp") && existsSync("/home/user"), "nothing outside scratch was removed");
  await assertHealthy(d, "end of RPC fuzz");
  t.diagnostic(`answers: ${JSON.stringify(Object.fromEntries([...tally].sort((a, b) => b[1] - a[1])))}`);
  t.diagnostic(`internal/unknown messages: ${[...internals].sort().join(" | ")}`);
});


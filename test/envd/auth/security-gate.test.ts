// The access-token gate on every route and every RPC over every transport (extends the
// matrix of init.test.ts), header tricks that must not pass, signed /files URLs (valid,
// wrong, expired, tampered expiry, another path, user or operation, the SDK's own URLs),
// constant-time comparison, and the daemon's logs at trace level grepped for the token,
// signatures, env values and file contents.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync, chownSync } from "node:fs";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import type { DescMethod } from "@bufbuild/protobuf";
import { Filesystem } from "../../../src/envd/gen/filesystem/filesystem_pb.js";
import { Process, Signal } from "../../../src/envd/gen/process/process_pb.js";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { clients, sdkSandbox } from "../helpers/clients.js";
import { assertHealthy } from "../helpers/fuzz.js";
import { AccessToken, safeEqual } from "../../../src/envd/auth/token.js";

const TOKEN = "tok-SECRET-7f3a9c21e4b84d0c9a1b";
const ENV_SECRET = "ENVSECRET-5d1e0b7a";
const CONTENT = "CONTENT-MARKER-0c4f7d2a";
const UNAUTHORIZED = "unauthorized access, please provide a valid access token or method signing if supported";
let d: Daemon;
let scratch: string;
const used: string[] = []; // signatures sent: none may show up in the logs

before(async () => {
  scratch = join("/tmp", `envd-gate-${process.pid}`);
  mkdirSync(scratch, { recursive: true });
  chownSync(scratch, 1001, 1001);
  writeFileSync(join(scratch, "file.txt"), "hello");
  d = await startDaemon({ args: ["--log-level", "trace", "--default-workdir", scratch] });
  const r = await fetch(`${d.url}/init`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ accessToken: TOKEN, envVars: { MY_SECRET: ENV_SECRET } }) });
  assert.equal(r.status, 204);
});

after(async () => {
  await d?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

const sel = { selector: { case: "pid" as const, value: 999_999 } };
/** A harmless request for every RPC. */
function requestFor(name: string): object {
  const table: Record<string, object> = {
    Stat: { path: scratch },
    MakeDir: { path: join(scratch, "made") },
    Move: { source: join(scratch, "none"), destination: join(scratch, "none2") },
    ListDir: { path: scratch },
    Remove: { path: join(scratch, "nothing") },
    WatchDir: { path: scratch },
    CreateWatcher: { path: scratch },
    GetWatcherEvents: { watcherId: "wnope" },
    RemoveWatcher: { watcherId: "wnope" },
    List: {},
    Connect: { process: sel },
    Start: { process: { cmd: "/bin/true" } },
    Update: { process: sel },
    SendInput: { process: sel, input: { input: { case: "stdin", value: new Uint8Array([1]) } } },
    SendSignal: { process: sel, signal: Signal.SIGTERM },
    CloseStdin: { process: sel },
  };
  return table[name] ?? {};
}

type AnyClient = Record<string, (req: unknown, opts?: { headers?: Record<string, string>; signal?: AbortSignal }) => unknown>;

/** Calls any RPC (unary, server or client stream) and returns the Connect code it ended with, or "ok". */
async function call(client: AnyClient, m: DescMethod, headers: Record<string, string>): Promise<string> {
  const fn = client[m.localName];
  try {
    if (m.methodKind === "unary") await fn(requestFor(m.name), { headers });
    else if (m.methodKind === "server_streaming") {
      const ac = new AbortController();
      const it = (fn(requestFor(m.name), { headers, signal: ac.signal }) as AsyncIterable<unknown>)[Symbol.asyncIterator]();
      await it.next();
      ac.abort();
    } else {
      async function* input() {
        yield { event: { case: "start", value: { process: sel } } };
      }
      await fn(input(), { headers });
    }
    return "ok";
  } catch (err) {
    return Code[ConnectError.from(err).code];
  }
}

test("every RPC on every transport: no token and wrong tokens are unauthenticated, the right one passes the gate", async () => {
  const c = clients(d.url);
  const wrong: Record<string, string>[] = [
    {},
    { "x-access-token": "nope" },
    { "x-access-token": TOKEN.toUpperCase() },
    { "x-access-token": TOKEN + "x" },
    { "x-access-token": TOKEN.slice(0, -1) },
    { authorization: `Bearer ${TOKEN}` },
    { "x-access-token": `nope, ${TOKEN}` },
  ];
  const problems: string[] = [];
  for (const [svc, desc] of [["fs", Filesystem], ["proc", Process]] as const) {
    for (const m of desc.methods) {
      for (const kind of ["json", "binary", "grpc", "grpcWeb"] as const) {
        const client = c[svc][kind] as unknown as AnyClient;
        if (m.methodKind === "client_streaming" && (kind === "json" || kind === "grpcWeb")) continue; // needs HTTP/2
        for (const h of wrong) {
          const got = await call(client, m, h);
          if (got !== "Unauthenticated") problems.push(`${m.name} ${kind} ${JSON.stringify(h)} → ${got}`);
        }
        const ok = await call(client, m, { "x-access-token": TOKEN });
        if (ok === "Unauthenticated") problems.push(`${m.name} ${kind} with the right token → Unauthenticated`);
      }
    }
  }
  assert.deepEqual(problems, []);
});

test("every plain route: gated ones answer the gate's 401, exempt ones their own rules, preflight passes", async () => {
  const gated: [string, string, string?][] = [
    ["GET", "/envs"], ["GET", "/metrics"], ["POST", "/files/compose", "{}"], ["GET", "/nope"], ["POST", "/nope", "{}"],
    ["GET", "/health/"], ["HEAD", "/health"], ["GET", "/filesystem.Filesystem/Stat"],
  ];
  for (const [method, path, body] of gated) {
    for (const h of [{}, { "x-access-token": "nope" }] as Record<string, string>[]) {
      const r = await fetch(d.url + path, { method, headers: { "content-type": "application/json", ...h }, body });
      assert.equal(r.status, 401, `${method} ${path} ${JSON.stringify(h)}`);
      if (method !== "HEAD") assert.deepEqual(await r.json(), { code: 401, message: UNAUTHORIZED });
    }
    const ok = await fetch(d.url + path, { method, headers: { "content-type": "application/json", "x-access-token": TOKEN }, body });
    assert.notEqual(ok.status, 401, `${method} ${path} with the token`);
  }
  assert.equal((await fetch(`${d.url}/health`)).status, 204, "health is open");
  const pre = await fetch(`${d.url}/files/compose`, { method: "OPTIONS", headers: { origin: "http://x", "access-control-request-method": "POST" } });
  assert.equal(pre.status, 204, "CORS preflight is answered before the gate");
  // The token in the query string is not a token.
  assert.equal((await fetch(`${d.url}/envs?access_token=${TOKEN}&x-access-token=${TOKEN}`)).status, 401);
  // /init authenticates itself: a different token is refused, the same one accepted.
  assert.equal((await fetch(`${d.url}/init`, { method: "POST", body: JSON.stringify({ accessToken: "other" }) })).status, 401);
  assert.equal((await fetch(`${d.url}/init`, { method: "POST", body: JSON.stringify({ accessToken: TOKEN }) })).status, 204);
  // /files/compose takes no signatures.
  const sig = sign(join(scratch, "file.txt"), "write", "");
  const comp = await fetch(`${d.url}/files/compose?signature=${encodeURIComponent(sig)}`, { method: "POST", body: JSON.stringify({ source_paths: [join(scratch, "file.txt")], destination: join(scratch, "c") }) });
  assert.equal(comp.status, 401);
});

function sign(path: string, op: "read" | "write", user: string, expiration?: number, token = TOKEN): string {
  let raw = `${path}:${op}:${user}:${token}`;
  if (expiration !== undefined) raw += `:${expiration}`;
  const s = "v1_" + createHash("sha256").update(raw).digest("base64").replace(/=+$/, "");
  used.push(s);
  return s;
}

async function files(method: "GET" | "POST", params: Record<string, string | undefined>, headers: Record<string, string> = {}): Promise<{ status: number; message: string }> {
  const u = new URL(`${d.url}/files`);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.append(k, v);
  const r = await fetch(u, { method, headers: { "content-type": "application/octet-stream", ...headers }, body: method === "POST" ? CONTENT : undefined });
  const text = await r.text();
  let message = text;
  try {
    message = (JSON.parse(text) as { message?: string }).message ?? text;
  } catch {
    // not JSON: keep the text
  }
  return { status: r.status, message };
}

test("signed /files URLs: valid, wrong, expired, tampered, for another path, user or operation", async () => {
  const path = join(scratch, "file.txt");
  const other = join(scratch, "other.txt");
  const now = Math.floor(Date.now() / 1000);
  const cases: [string, "GET" | "POST", Record<string, string | undefined>, number, RegExp?][] = [
    ["valid read", "GET", { path, signature: sign(path, "read", "") }, 200],
    ["valid read as a named user", "GET", { path, username: "user", signature: sign(path, "read", "user") }, 200],
    ["valid write with expiry", "POST", { path: other, signature: sign(other, "write", "", now + 600), signature_expiration: String(now + 600) }, 200],
    ["no signature", "GET", { path }, 401, /^missing signature query parameter$/],
    ["wrong signature", "GET", { path, signature: "v1_AAAA" }, 401, /^invalid signature$/],
    ["empty signature", "GET", { path, signature: "" }, 401, /^invalid signature$/],
    ["signed for another path", "GET", { path, signature: sign(other, "read", "") }, 401, /^invalid signature$/],
    ["the raw path is signed, not the resolved one", "GET", { path: "file.txt", signature: sign(path, "read", "") }, 401, /^invalid signature$/],
    ["signed for another user", "GET", { path, username: "root", signature: sign(path, "read", "user") }, 401, /^invalid signature$/],
    ["signed for the default user, sent for root", "GET", { path, username: "root", signature: sign(path, "read", "") }, 401, /^invalid signature$/],
    ["a read signature used to write", "POST", { path, signature: sign(path, "read", "") }, 401, /^invalid signature$/],
    ["signed with another token", "GET", { path, signature: sign(path, "read", "", undefined, "other-token") }, 401, /^invalid signature$/],
    ["expired", "GET", { path, signature: sign(path, "read", "", now - 3600), signature_expiration: String(now - 3600) }, 401, /^signature is already expired$/],
    ["expiry extended after signing", "GET", { path, signature: sign(path, "read", "", now - 60), signature_expiration: String(now + 3600) }, 401, /^invalid signature$/],
    ["expiry dropped after signing", "GET", { path, signature: sign(path, "read", "", now + 60) }, 401, /^invalid signature$/],
    ["non-integer expiry", "GET", { path, signature: sign(path, "read", ""), signature_expiration: "soon" }, 400],
  ];
  for (const [what, method, params, status, message] of cases) {
    const r = await files(method, params);
    assert.equal(r.status, status, `${what}: ${r.status} ${r.message}`);
    if (message) assert.match(r.message, message, what);
  }
  // The header wins over a signature: a wrong header with a valid signature is refused.
  const both = await files("GET", { path, signature: sign(path, "read", "") }, { "x-access-token": "nope" });
  assert.equal(both.status, 401);
  assert.match(both.message, /access token present in header but does not match/);
  assert.equal((await files("GET", { path }, { "x-access-token": TOKEN })).status, 200, "the right header needs no signature");
  // A repeated signature parameter is a format error, not a second chance.
  const rep = new URL(`${d.url}/files`);
  rep.searchParams.append("path", path);
  rep.searchParams.append("signature", "v1_AAAA");
  rep.searchParams.append("signature", sign(path, "read", ""));
  assert.equal((await fetch(rep)).status, 400);
});

test("the SDK's own signed URLs work for awkward paths; the reference's worked examples hold", async () => {
  const sbx = await sdkSandbox(d.url, { envdAccessToken: TOKEN });
  for (const name of ["plain.txt", "with space.txt", "plus+and&amp.txt", "ünï cødé.txt", "a/b/c.txt"]) {
    const path = join(scratch, "sdk", name);
    const up = await sbx.uploadUrl(path, { useSignatureExpiration: 600 });
    used.push(new URL(up).searchParams.get("signature")!);
    const form = new FormData();
    form.append("file", new Blob([CONTENT]), "ignored");
    assert.equal((await fetch(up, { method: "POST", body: form })).status, 200, `upload via signed URL: ${name}`);
    const down = await sbx.downloadUrl(path, { user: "user" });
    used.push(new URL(down).searchParams.get("signature")!);
    const r = await fetch(down);
    assert.equal(r.status, 200, `download via signed URL: ${name}`);
    assert.equal(await r.text(), CONTENT);
  }
  // envd-behaviour §3.4 worked examples, on a daemon whose token is "tok".
  const t = await startDaemon();
  try {
    await fetch(`${t.url}/init`, { method: "POST", body: JSON.stringify({ accessToken: "tok" }) });
    const read = await fetch(`${t.url}/files?path=${encodeURIComponent("/home/user/a.txt")}&signature=${encodeURIComponent("v1_Zkbb3914oLJLvMBzCAHQhm2ydBLxbSx2eQUR/kLdvIY")}`);
    assert.notEqual(read.status, 401, "the worked read signature is accepted (then 404 or 200)");
    const write = await fetch(`${t.url}/files?path=${encodeURIComponent("/home/user/a.txt")}&username=user&signature_expiration=1767225600&signature=${encodeURIComponent("v1_/9w/WwXs3BsvxmHta7BtqbbSNmG3EHLrppYpIFot+To")}`, { method: "POST", headers: { "content-type": "application/octet-stream" }, body: "x" });
    const expected = Date.now() / 1000 > 1767225600 ? /signature is already expired/ : /.*/;
    assert.match(((await write.json()) as { message: string }).message ?? "", expected, "the worked write signature matches (and is judged on its expiry)");
  } finally {
    await t.stop();
  }
});

test("token comparisons take the same time wherever the candidate differs", () => {
  const token = new AccessToken();
  token.set(TOKEN);
  const candidates = [TOKEN.replace(/^./, "X"), TOKEN.replace(/.$/, "X"), "short", TOKEN + "x".repeat(200)];
  const rounds = 40;
  const per = 1000;
  /** First-byte vs last-byte differing: the fastest round of each (other load only ever adds time). */
  const measure = (): [number, number] => {
    const times = candidates.map(() => [] as number[]);
    for (let r = 0; r < rounds; r++) {
      // A different order every round: no candidate always runs first (colder) or last.
      for (let j = 0; j < candidates.length; j++) {
        const i = (r + j) % candidates.length;
        const t0 = process.hrtime.bigint();
        for (let k = 0; k < per; k++) token.equals(candidates[i]);
        times[i].push(Number(process.hrtime.bigint() - t0));
      }
    }
    return [Math.min(...times[0]), Math.min(...times[1])];
  };
  // The early-exit signature of a naive compare shows in every measurement; a noisy VM's bursts
  // (the hypervisor taking the CPU for milliseconds) in one now and then: up to three tries.
  let [first, last] = measure();
  for (let attempt = 1; attempt < 3 && !(first / last > 0.6 && first / last < 1.6); attempt++) [first, last] = measure();
  assert.ok(first / last > 0.6 && first / last < 1.6, `first vs last byte differing: ${first} vs ${last} ns`);
  assert.equal(safeEqual(TOKEN, TOKEN), true);
  assert.equal(safeEqual(TOKEN, TOKEN + "x"), false);
});

test("the logs (at trace level) never contain the token, a signature, an env value or file contents", async () => {
  await assertHealthy(d, "gate suite");
  const logs = d.logs();
  assert.ok(logs.length > 1000, "the daemon logged the requests");
  assert.equal(logs.includes(TOKEN), false, "the access token appears in the logs");
  for (const s of used) assert.equal(logs.includes(s) || logs.includes(encodeURIComponent(s)), false, `a signature appears in the logs: ${s}`);
  assert.equal(logs.includes(ENV_SECRET), false, "an /init env value appears in the logs");
  assert.equal(logs.includes(CONTENT), false, "uploaded file contents appear in the logs");
  // Nor does the token reach the sandbox's processes or /envs.
  const envs = await (await fetch(`${d.url}/envs`, { headers: { "x-access-token": TOKEN } })).text();
  assert.equal(envs.includes(TOKEN), false);
});

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import xattr from "@napi-rs/xattr";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { sdkSandbox, tempDir } from "../helpers/clients.js";

type Sbx = Awaited<ReturnType<typeof sdkSandbox>>;

let d: Daemon;
let sbx: Sbx;
let dir: { path: string; cleanup(): void };
const relRoot = `envd-files-sdk-${process.pid}`;

before(async () => {
  d = await startDaemon();
  sbx = await sdkSandbox(d.url);
  dir = await tempDir("files-sdk");
});

after(async () => {
  dir.cleanup();
  rmSync(join("/home/user", relRoot), { recursive: true, force: true });
  await d.stop();
});

const e2b = () => import("e2b");

test("read: text, bytes, blob, stream and gzip", async () => {
  const path = join(dir.path, "read.txt");
  const content = "héllo wörld\n".repeat(1000);
  writeFileSync(path, content);
  assert.equal(await sbx.files.read(path), content);
  assert.deepEqual(Buffer.from(await sbx.files.read(path, { format: "bytes" })), Buffer.from(content));
  const blob = await sbx.files.read(path, { format: "blob" });
  assert.equal(await blob.text(), content);
  const stream = await sbx.files.read(path, { format: "stream" });
  const chunks: Uint8Array[] = [];
  for await (const c of stream as unknown as AsyncIterable<Uint8Array>) chunks.push(c);
  assert.equal(Buffer.concat(chunks).toString(), content);
  assert.equal(await sbx.files.read(path, { gzip: true }), content);

  // What the SDK's gzip request gets on the wire.
  const raw = await fetch(`${d.url}/files?path=${encodeURIComponent(path)}`, { headers: { "accept-encoding": "gzip" } });
  assert.equal(raw.headers.get("content-encoding"), "gzip"); // undici decodes transparently
  assert.equal(await raw.text(), content);

  writeFileSync(join(dir.path, "empty.txt"), "");
  assert.equal(await sbx.files.read(join(dir.path, "empty.txt")), "");
  assert.equal((await sbx.files.read(join(dir.path, "empty.txt"), { format: "bytes" })).length, 0);
});

test("read: missing file → FileNotFoundError, directory → InvalidArgumentError, unknown user → AuthenticationError", async () => {
  const { FileNotFoundError, InvalidArgumentError, AuthenticationError } = await e2b();
  await assert.rejects(sbx.files.read(join(dir.path, "nope.txt")), FileNotFoundError);
  await assert.rejects(sbx.files.read(dir.path), InvalidArgumentError);
  await assert.rejects(sbx.files.read(join(dir.path, "x"), { user: "no-such-user" }), AuthenticationError);
});

test("write: string, bytes, blob and ReadableStream; owner user, mode 0644, parents 0755", async () => {
  const a = join(dir.path, "w", "deep", "a.txt");
  const info = await sbx.files.write(a, "text body");
  assert.deepEqual(info, { path: a, name: "a.txt", type: "file", metadata: undefined });
  assert.equal(readFileSync(a, "utf8"), "text body");
  const st = statSync(a);
  assert.equal(st.uid, 1001);
  assert.equal(st.mode & 0o777, 0o644);
  const parent = statSync(join(dir.path, "w", "deep"));
  assert.equal(parent.uid, 1001);
  assert.equal(parent.mode & 0o777, 0o755);

  const bytes = Buffer.from([0, 1, 2, 250, 251, 252]);
  await sbx.files.write(join(dir.path, "b.bin"), bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) as ArrayBuffer);
  assert.deepEqual(readFileSync(join(dir.path, "b.bin")), bytes);
  await sbx.files.write(join(dir.path, "c.txt"), new Blob(["from a blob"]));
  assert.equal(readFileSync(join(dir.path, "c.txt"), "utf8"), "from a blob");

  const big = Buffer.alloc(3 * 1024 * 1024, "z");
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      for (let i = 0; i < big.length; i += 65536) c.enqueue(big.subarray(i, i + 65536));
      c.close();
    },
  });
  const s = await sbx.files.write(join(dir.path, "stream.txt"), stream);
  assert.equal((s as { name: string }).name, "stream.txt");
  assert.deepEqual(readFileSync(join(dir.path, "stream.txt")), big);
});

test("write with gzip:true and with metadata; overwriting clears stale metadata", async () => {
  const p = join(dir.path, "gz.txt");
  await sbx.files.write(p, "zipped ".repeat(100), { gzip: true });
  assert.equal(readFileSync(p, "utf8"), "zipped ".repeat(100));

  const m = join(dir.path, "meta.txt");
  const withMeta = await sbx.files.write(m, "v1", { metadata: { Author: "alice", "team-id": "42" } });
  assert.deepEqual((withMeta as { metadata?: unknown }).metadata, { author: "alice", "team-id": "42" });
  assert.equal(Buffer.from(xattr.getAttributeSync(m, "user.e2b.author")!).toString(), "alice");

  // A plain user.* xattr is not metadata and is not reported.
  xattr.setAttributeSync(m, "user.other", "x");
  const replaced = await sbx.files.write(m, "v2", { metadata: { author: "bob" } });
  assert.deepEqual((replaced as { metadata?: unknown }).metadata, { author: "bob" });
  assert.equal(xattr.getAttributeSync(m, "user.e2b.team-id"), null);

  const cleared = await sbx.files.write(m, "v3");
  assert.equal((cleared as { metadata?: unknown }).metadata, undefined);
  assert.deepEqual(xattr.listAttributesSync(m).filter((n) => n.startsWith("user.e2b.")), []);
  assert.equal(readFileSync(m, "utf8"), "v3");

  // gzip + metadata travel together on the octet-stream path.
  const gm = await sbx.files.write(join(dir.path, "gzm.txt"), "g", { gzip: true, metadata: { k: "v" } });
  assert.deepEqual((gm as { metadata?: unknown }).metadata, { k: "v" });
});

test("writeFiles: arrays with relative and absolute paths and nested dirs, in order", async () => {
  const files = [
    { path: join(dir.path, "arr", "one.txt"), data: "one" },
    { path: `${relRoot}/nested/two.txt`, data: "two" },
    { path: join(dir.path, "arr", "x", "y", "three.bin"), data: new Uint8Array([3, 3, 3]).buffer as ArrayBuffer },
  ];
  const infos = await sbx.files.writeFiles(files);
  assert.deepEqual(
    infos.map((i) => i.path),
    [files[0].path, join("/home/user", relRoot, "nested", "two.txt"), files[2].path],
  );
  assert.deepEqual(
    infos.map((i) => i.name),
    ["one.txt", "two.txt", "three.bin"],
  );
  assert.equal(readFileSync(join("/home/user", relRoot, "nested", "two.txt"), "utf8"), "two");
  assert.equal(statSync(join("/home/user", relRoot)).uid, 1001);
  assert.deepEqual([...readFileSync(files[2].path)], [3, 3, 3]);

  // The same array as streams goes octet-stream, one request per file.
  const streamed = await sbx.files.write(
    files.map((f, i) => ({ path: f.path, data: new Blob([`s${i}`]).stream() })),
  );
  assert.equal(streamed.length, 3);
  assert.equal(readFileSync(files[0].path, "utf8"), "s0");
  assert.deepEqual(await sbx.files.write([]), []);
});

test("write errors: a directory target → InvalidArgumentError", async () => {
  const { InvalidArgumentError } = await e2b();
  await assert.rejects(sbx.files.write(dir.path, "x"), InvalidArgumentError);
  await assert.rejects(sbx.files.write(dir.path, new Blob(["x"]).stream()), InvalidArgumentError);
});

const init = (url: string, body: unknown) =>
  fetch(`${url}/init`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

test("signed uploadUrl/downloadUrl against a daemon whose token was set by /init", async () => {
  const token = "0tQG31xiMp0IOQfaz9dcwi72L1CPo8e0";
  const secured = await startDaemon();
  try {
    assert.equal((await init(secured.url, { accessToken: token })).status, 204);
    const { Sandbox, AuthenticationError } = await e2b();
    // The SDK's own constructor (public, marked internal) is how it builds a secured sandbox.
    const signed = new Sandbox({
      sandboxId: "debug_sandbox_id",
      envdVersion: "99.99.99",
      envdAccessToken: token,
      debug: true,
      sandboxUrl: secured.url,
    });
    const path = join(dir.path, "signed.txt");

    // Without a header or signature the routes refuse; the SDK's calls carry the token header.
    const bare = await fetch(`${secured.url}/files?path=${encodeURIComponent(path)}`);
    assert.equal(bare.status, 401);
    assert.deepEqual(await bare.json(), { code: 401, message: "missing signature query parameter" });
    await signed.files.write(path, "via header");
    assert.equal(await signed.files.read(path), "via header");
    const unsigned = await sdkSandbox(secured.url);
    await assert.rejects(unsigned.files.read(path), AuthenticationError);

    // Upload through a signed URL (multipart, as documented), then download through one.
    const up = await signed.uploadUrl(path);
    assert.match(up, /signature=v1_/);
    const form = new FormData();
    form.append("file", new Blob(["signed upload"]), "ignored-name");
    const upRes = await fetch(up, { method: "POST", body: form });
    assert.equal(upRes.status, 200);
    assert.deepEqual(await upRes.json(), [{ path, name: "signed.txt", type: "file" }]);
    const down = await signed.downloadUrl(path, { useSignatureExpiration: 120 });
    assert.match(down, /signature_expiration=\d+/);
    const downRes = await fetch(down);
    assert.equal(downRes.status, 200);
    assert.equal(await downRes.text(), "signed upload");

    // A signature for another operation or a tampered one is refused.
    const wrong = new URL(down);
    wrong.searchParams.set("signature", "v1_AAAA");
    const wrongRes = await fetch(wrong);
    assert.equal(wrongRes.status, 401);
    assert.deepEqual(await wrongRes.json(), { code: 401, message: "invalid signature" });
    const readAsWrite = new URL(await signed.downloadUrl(path));
    assert.equal((await fetch(readAsWrite, { method: "POST", body: form })).status, 401);

    const expired = await fetch(await signed.downloadUrl(path, { useSignatureExpiration: -60 }));
    assert.equal(expired.status, 401);
    assert.deepEqual(await expired.json(), { code: 401, message: "signature is already expired" });

    // With a user in the URL the signature binds it too.
    const asRoot = await fetch(await signed.downloadUrl(path, { user: "root" }));
    assert.equal(asRoot.status, 200);
    const wrongHeader = await fetch(`${secured.url}/files?path=${encodeURIComponent(path)}`, { headers: { "x-access-token": "nope" } });
    assert.deepEqual(await wrongHeader.json(), { code: 401, message: "access token present in header but does not match" });
    const badExpiry = new URL(down);
    badExpiry.searchParams.set("signature_expiration", "soon");
    assert.equal((await fetch(badExpiry)).status, 400);
  } finally {
    await secured.stop();
  }
});

test("a gzip download of a large file decodes to the same bytes", async () => {
  const p = join(dir.path, "large.txt");
  const content = Buffer.alloc(2 * 1024 * 1024, "abcdefgh");
  writeFileSync(p, content);
  const res = await fetch(`${d.url}/files?path=${encodeURIComponent(p)}`, { headers: { "accept-encoding": "gzip" } });
  assert.equal(res.headers.get("content-length"), null);
  assert.deepEqual(Buffer.from(await res.arrayBuffer()), content);
  // And undecoded through node:http for certainty about the coding.
  const { request } = await import("node:http");
  const gz = await new Promise<Buffer>((resolve, reject) => {
    request(`${d.url}/files?path=${encodeURIComponent(p)}`, { headers: { "accept-encoding": "gzip" } }, (r) => {
      const parts: Buffer[] = [];
      r.on("data", (c: Buffer) => parts.push(c)).on("end", () => resolve(Buffer.concat(parts)));
    })
      .on("error", reject)
      .end();
  });
  assert.ok(gz.length < content.length / 10);
  assert.deepEqual(gunzipSync(gz), content);
});

test("watchers see uploads as the reference's: CREATE then WRITE for a new file, WRITE for an overwrite", async () => {
  const w = join(dir.path, "watched");
  await sbx.files.makeDir(w);
  const events: string[] = [];
  const handle = await sbx.files.watchDir(w, (e) => void events.push(`${e.type} ${e.name}`));
  const waitFor = async (want: string) => {
    const deadline = Date.now() + 5000;
    while (!events.includes(want) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.ok(events.includes(want), `${want} in ${JSON.stringify(events)}`);
  };
  try {
    await sbx.files.write(join(w, "f.txt"), "first");
    await waitFor("write f.txt");
    assert.equal(events.find((e) => e.endsWith(" f.txt")), "create f.txt", "a new file is created under its own name");
    events.length = 0;
    await sbx.files.write(join(w, "f.txt"), "second");
    await waitFor("write f.txt");
  } finally {
    await handle.stop();
  }
});

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { tempDir } from "../helpers/clients.js";

let d: Daemon;
let dir: { path: string; cleanup(): void };
const mounts: string[] = [];

before(async () => {
  d = await startDaemon();
  dir = await tempDir("files-up");
});

after(async () => {
  for (const m of mounts) {
    try {
      execFileSync("umount", [m]);
    } catch {
      // already gone
    }
    if (statSync(m).isDirectory()) rmSync(m, { recursive: true, force: true });
  }
  dir.cleanup();
  await d.stop();
});

/** Mounts a small tmpfs for the test (removed in after()). */
function smallTmpfs(options: string): string {
  const m = mkdtempSync(join(tmpdir(), "envd-tmpfs-"));
  execFileSync("mount", ["-t", "tmpfs", "-o", options, "tmpfs", m]);
  mounts.push(m);
  return m;
}

const filesUrl = (query: Record<string, string> = {}) => `${d.url}/files?${new URLSearchParams(query)}`;

function raw(path: string, body: BodyInit, headers: Record<string, string> = {}) {
  return fetch(filesUrl({ path }), { method: "POST", body, headers: { "content-type": "application/octet-stream", ...headers } });
}

/** A hand-built multipart body, for what FormData cannot express. */
function multipart(parts: Array<{ name?: string; filename?: string; data: string }>, boundary = "XBOUNDARYX"): { body: Buffer; type: string } {
  let text = "";
  for (const p of parts) {
    let disp = "form-data";
    if (p.name !== undefined) disp += `; name="${p.name}"`;
    if (p.filename !== undefined) disp += `; filename="${p.filename}"`;
    text += `--${boundary}\r\nContent-Disposition: ${disp}\r\nContent-Type: application/octet-stream\r\n\r\n${p.data}\r\n`;
  }
  text += `--${boundary}--\r\n`;
  return { body: Buffer.from(text), type: `multipart/form-data; boundary=${boundary}` };
}

const post = (body: Buffer, type: string, query: Record<string, string> = {}, headers: Record<string, string> = {}) =>
  fetch(filesUrl(query), { method: "POST", body: new Uint8Array(body), headers: { "content-type": type, ...headers } });

/** Makes what a sandbox user made: owned by `user` (uid 1001), as uploads act as that user. */
function own<T extends string>(path: T): T {
  chownSync(path, 1001, 1001);
  return path;
}

const tempsIn = (path: string) => readdirSync(path).filter((n) => n.includes(".envd-upload."));

test("raw upload: response shape and content type; errors for missing path and content types", async () => {
  const p = join(dir.path, "raw.txt");
  const r = await raw(p, "raw body");
  assert.equal(r.status, 200);
  assert.equal(r.headers.get("content-type"), "application/json");
  assert.deepEqual(await r.json(), [{ path: p, name: "raw.txt", type: "file" }]);
  assert.equal(readFileSync(p, "utf8"), "raw body");

  const noPath = await fetch(filesUrl(), { method: "POST", body: "x", headers: { "content-type": "application/octet-stream" } });
  assert.equal(noPath.status, 400);
  assert.deepEqual(await noPath.json(), { code: 400, message: "path query parameter is required for raw body upload" });
  const text = await fetch(filesUrl({ path: p }), { method: "POST", body: "x", headers: { "content-type": "text/plain" } });
  assert.deepEqual(await text.json(), { code: 400, message: "unsupported content type: text/plain, expected multipart/form-data or application/octet-stream" });
  const none = await fetch(filesUrl({ path: p }), { method: "POST", body: new Uint8Array([1]) });
  assert.equal(none.status, 400);
  assert.equal(readFileSync(p, "utf8"), "raw body", "refused uploads leave the file alone");

  const nul = await raw(join(dir.path, "a\0b"), "x");
  assert.equal(nul.status, 400);
  assert.match((await nul.json()).message, /^error resolving path: invalid path/);
  assert.equal((await raw("/" + "x".repeat(5000), "x")).status, 400);
  const nulPart = multipart([{ name: "file", filename: join(dir.path, "a\0b"), data: "x" }]);
  assert.equal((await post(nulPart.body, nulPart.type)).status, 400);
  const who = await fetch(filesUrl({ path: p, username: "nobody-here" }), { method: "POST", body: "x", headers: { "content-type": "application/octet-stream" } });
  assert.equal(who.status, 401);
});

test("raw upload: gzip bodies, unsupported and corrupt encodings", async () => {
  const p = join(dir.path, "gz.txt");
  const content = "compressed ".repeat(5000);
  const ok = await raw(p, gzipSync(content), { "content-encoding": "GZIP;q=1.0" });
  assert.equal(ok.status, 200);
  assert.equal(readFileSync(p, "utf8"), content);

  const br = await raw(p, "x", { "content-encoding": "br" });
  assert.deepEqual(await br.json(), { code: 400, message: "error decompressing request body: unsupported Content-Encoding: br, supported: [gzip]" });
  const bad = await raw(p, "not gzip at all", { "content-encoding": "gzip" });
  assert.equal(bad.status, 400);
  assert.match((await bad.json()).message, /^error decompressing request body: failed to create gzip reader: /);
  const truncated = gzipSync(randomBytes(200_000)).subarray(0, 50_000);
  const cut = await raw(p, truncated, { "content-encoding": "gzip" });
  assert.equal(cut.status, 400);
  assert.match((await cut.json()).message, /^error decompressing request body: /);
  assert.equal(readFileSync(p, "utf8"), content, "a failed gzip upload keeps the old content");
  assert.deepEqual(tempsIn(dir.path), []);
});

test("metadata validation refuses bad headers before anything is written", async () => {
  const p = join(dir.path, "never.txt");
  const long = await raw(p, "x", { ["x-metadata-" + "k".repeat(247)]: "v" });
  assert.equal(long.status, 400);
  assert.match((await long.json()).message, /^invalid metadata: /);
  const big = await raw(p, "x", { "x-metadata-a": "v".repeat(3000), "x-metadata-b": "v".repeat(1200) });
  assert.equal(big.status, 400);
  assert.equal(existsSync(p), false);
  const ok = await raw(p, "x", { "x-metadata-Key": "Value With Spaces" });
  assert.deepEqual((await ok.json())[0].metadata, { key: "Value With Spaces" });
});

test("multipart: parts in order, filename as full path, non-file parts skipped, path query", async () => {
  const a = join(dir.path, "mp", "a.txt");
  const { body, type } = multipart([
    { name: "file", filename: a, data: "A" },
    { name: "note", data: "ignored field" },
    { name: "other", filename: join(dir.path, "mp", "skipped.txt"), data: "S" },
    { name: "file", filename: `envd-up-${process.pid}/b.txt`, data: "B" },
  ]);
  try {
    const r = await post(body, type);
    assert.equal(r.status, 200);
    const b = join("/home/user", `envd-up-${process.pid}`, "b.txt");
    assert.deepEqual(await r.json(), [
      { path: a, name: "a.txt", type: "file" },
      { path: b, name: "b.txt", type: "file" },
    ]);
    assert.equal(readFileSync(b, "utf8"), "B");
    assert.equal(existsSync(join(dir.path, "mp", "skipped.txt")), false);
  } finally {
    rmSync(join("/home/user", `envd-up-${process.pid}`), { recursive: true, force: true });
  }

  const target = join(dir.path, "mp", "by-query.txt");
  const q = multipart([{ name: "file", filename: "whatever.bin", data: "Q" }]);
  const rq = await post(q.body, q.type, { path: target });
  assert.deepEqual(await rq.json(), [{ path: target, name: "by-query.txt", type: "file" }]);
  const noName = multipart([{ name: "file", data: "no filename, but a path query" }]);
  assert.equal((await post(noName.body, noName.type, { path: target })).status, 200);
  assert.equal(readFileSync(target, "utf8"), "no filename, but a path query");

  // multipart/mixed is read like form data, as the reference does.
  const mixed = multipart([{ name: "file", filename: join(dir.path, "mp", "mixed.txt"), data: "M" }]);
  assert.equal((await post(mixed.body, mixed.type.replace("form-data", "mixed"))).status, 200);
});

test("multipart edge cases: duplicates, no file part, missing filename, malformed bodies", async () => {
  const p1 = join(dir.path, "dup", "1.txt");
  const dup = multipart([
    { name: "file", filename: p1, data: "first" },
    { name: "file", filename: p1, data: "second" },
  ]);
  const r = await post(dup.body, dup.type);
  assert.equal(r.status, 400);
  assert.deepEqual(await r.json(), {
    code: 400,
    message: `you cannot upload multiple files to the same path '${p1}' in one upload request, only the first specified file was uploaded`,
  });
  assert.equal(readFileSync(p1, "utf8"), "first", "earlier parts stay written");
  const p2 = join(dir.path, "dup", "2.txt");
  const p3 = join(dir.path, "dup", "3.txt");
  const dup3 = multipart([
    { name: "file", filename: p1, data: "1" },
    { name: "file", filename: p2, data: "2" },
    { name: "file", filename: p3, data: "3" },
    { name: "file", filename: p2, data: "again" },
  ]);
  const r3 = await post(dup3.body, dup3.type);
  assert.match((await r3.json()).message, new RegExp(`, also the following files were uploaded: ${p1}, ${p3}$`));

  const empty = multipart([{ name: "other", data: "x" }]);
  const re = await post(empty.body, empty.type);
  assert.equal(re.status, 200);
  assert.deepEqual(await re.json(), []);

  const noName = multipart([{ name: "file", data: "x" }]);
  const rn = await post(noName.body, noName.type);
  assert.equal(rn.status, 400);
  assert.match((await rn.json()).message, /^error getting multipart custom part file name: /);

  const noBoundary = await post(Buffer.from("x"), "multipart/form-data");
  assert.equal(noBoundary.status, 400);
  assert.match((await noBoundary.json()).message, /^error parsing multipart form: /);
  const garbage = await post(Buffer.from("this is not multipart"), "multipart/form-data; boundary=ZZ");
  assert.equal(garbage.status, 400);
  const cut = Buffer.from(`--ZZ\r\nContent-Disposition: form-data; name="file"; filename="${join(dir.path, "cut.txt")}"\r\n\r\nhalf a fi`);
  const rc = await post(cut, "multipart/form-data; boundary=ZZ");
  assert.equal(rc.status, 400);
  assert.match((await rc.json()).message, /^error reading form: /);
  assert.equal(existsSync(join(dir.path, "cut.txt")), false, "a truncated part leaves nothing");
  assert.deepEqual(tempsIn(dir.path), []);

  const gz = multipart([{ name: "file", filename: join(dir.path, "mpgz.txt"), data: "gzipped form" }]);
  assert.equal((await post(gzipSync(gz.body), gz.type, {}, { "content-encoding": "gzip" })).status, 200);
  assert.equal(readFileSync(join(dir.path, "mpgz.txt"), "utf8"), "gzipped form");
  assert.equal(d.proc.exitCode, null);
});

test("targets: directory → 400, parent is a file, symlinks written through, mode of an overwritten file kept", async () => {
  const r = await raw(dir.path, "x");
  assert.equal(r.status, 400);
  assert.deepEqual(await r.json(), { code: 400, message: `path is a directory: ${dir.path}` });
  writeFileSync(join(dir.path, "plainfile"), "f");
  assert.notEqual((await raw(join(dir.path, "plainfile", "child.txt"), "x")).status, 200);

  const real = join(dir.path, "real.txt");
  const link = join(dir.path, "link.txt");
  writeFileSync(real, "old");
  symlinkSync(real, link);
  assert.equal((await raw(link, "through the link")).status, 200);
  assert.ok(lstatSync(link).isSymbolicLink(), "the link stays a link");
  assert.equal(readFileSync(real, "utf8"), "through the link");

  const script = join(dir.path, "run.sh");
  writeFileSync(script, "#!/bin/sh\n");
  chmodSync(script, 0o755);
  assert.equal((await raw(script, "#!/bin/sh\necho hi\n")).status, 200);
  assert.equal(statSync(script).mode & 0o777, 0o755);
  assert.equal(statSync(script).uid, 1001, "overwriting hands the file to the uploading user");
  assert.equal((await raw(join(dir.path, "as-root.txt"), "r", {})).status, 200);
  const asRoot = await fetch(filesUrl({ path: join(dir.path, "root-owned.txt"), username: "root" }), {
    method: "POST",
    body: "r",
    headers: { "content-type": "application/octet-stream" },
  });
  assert.equal(asRoot.status, 200);
  assert.equal(statSync(join(dir.path, "root-owned.txt")).uid, 0);
});

test("devices are refused, procfs is written in place; a bind-mounted file is overwritten through a copy", async () => {
  const r = await raw("/dev/null", "discarded");
  assert.equal(r.status, 400);
  assert.match((await r.json()).message, /^path '\/dev\/null' is not a regular file/);
  assert.ok(lstatSync("/dev/null").isCharacterDevice());
  // /proc/self is the daemon itself (root's): renaming its main thread is harmless and observable,
  // and only root may do it.
  assert.equal((await raw("/proc/self/comm", "not-as-user")).status, 403);
  const comm = await fetch(filesUrl({ path: "/proc/self/comm", username: "root" }), { method: "POST", body: "envd-files-test", headers: { "content-type": "application/octet-stream" } });
  assert.equal(comm.status, 200);
  assert.equal(readFileSync(`/proc/${d.pid}/comm`, "utf8").trim(), "envd-files-test");

  // A file bind-mounted over the target (as container runtimes do for /etc/hosts) cannot be renamed over.
  const source = join(dir.path, "bind-source.txt");
  const target = join(dir.path, "bind-target.txt");
  writeFileSync(source, "original");
  writeFileSync(target, "hidden");
  own(source);
  own(target);
  execFileSync("mount", ["--bind", source, target]);
  mounts.push(target);
  const rb = await raw(target, "replaced through the mount");
  assert.equal(rb.status, 200);
  assert.equal(readFileSync(target, "utf8"), "replaced through the mount");
  assert.equal(readFileSync(source, "utf8"), "replaced through the mount");
  assert.deepEqual(tempsIn(dir.path), []);
});

test("ENOSPC for data → 507, old content intact, no temp file left", async () => {
  const m = smallTmpfs("size=1m");
  const p = join(m, "full.txt");
  writeFileSync(p, "precious old content");
  own(p);
  const big = Buffer.alloc(2 * 1024 * 1024, "x");
  const r = await raw(p, big);
  assert.equal(r.status, 507);
  assert.deepEqual(await r.json(), { code: 507, message: `attempted to write ${big.length} bytes: not enough disk space available` });
  assert.equal(readFileSync(p, "utf8"), "precious old content");
  assert.deepEqual(readdirSync(m), ["full.txt"]);

  const form = multipart([{ name: "file", filename: p, data: "y".repeat(2 * 1024 * 1024) }]);
  const rm = await post(form.body, form.type);
  assert.equal(rm.status, 507);
  assert.equal(readFileSync(p, "utf8"), "precious old content");
  assert.deepEqual(readdirSync(m), ["full.txt"]);
  // The daemon still serves the next request on a fresh connection.
  assert.equal((await raw(p, "fits")).status, 200);
  assert.equal(readFileSync(p, "utf8"), "fits");
});

test("ENOSPC for inodes and for metadata → 507", async () => {
  const inodes = smallTmpfs("size=1m,nr_inodes=2");
  const existing = join(inodes, "old.txt");
  writeFileSync(existing, "old");
  own(existing);
  const r = await raw(join(inodes, "new.txt"), "x");
  assert.equal(r.status, 507);
  assert.match((await r.json()).message, /^not enough inodes available: /);
  const over = await raw(existing, "rewritten in place");
  assert.equal(over.status, 200, "an existing file is rewritten in place when no inode is left for a temp file");
  assert.equal(readFileSync(existing, "utf8"), "rewritten in place");

  // tmpfs charges xattrs to a space sized by nr_inodes: a tiny one cannot hold 3 KB of metadata.
  const meta = smallTmpfs("size=1m,nr_inodes=4");
  const p = join(meta, "m.txt");
  writeFileSync(p, "keep me");
  own(p);
  const rm = await raw(p, "new", { "x-metadata-big": "v".repeat(3000) });
  assert.equal(rm.status, 507);
  assert.match((await rm.json()).message, /^not enough space for file metadata: /);
  assert.equal(readFileSync(p, "utf8"), "keep me");
  assert.deepEqual(readdirSync(meta), ["m.txt"]);
});

test("an upload cut off mid-body leaves the old file intact (or no file) and no temp file", async () => {
  const sub = join(dir.path, "cut");
  mkdirSync(sub);
  own(sub);
  const p = join(sub, "victim.txt");
  writeFileSync(p, "old content");
  own(p);
  const fresh = join(sub, "fresh.txt");
  const cases = [
    { kind: "raw", target: p, writing: () => tempsIn(sub).length === 1 },
    { kind: "multipart", target: p, writing: () => tempsIn(sub).length === 1 },
    { kind: "raw", target: fresh, writing: () => existsSync(fresh) && statSync(fresh).size > 0 },
  ] as const;
  for (const { kind, target, writing } of cases) {
    const sock = connect(d.port, "127.0.0.1");
    await new Promise<void>((resolve) => sock.once("connect", () => resolve()));
    const query = kind === "raw" ? `?path=${encodeURIComponent(target)}` : "";
    const type = kind === "raw" ? "application/octet-stream" : "multipart/form-data; boundary=CUT";
    const head = kind === "raw" ? "" : `--CUT\r\nContent-Disposition: form-data; name="file"; filename="${target}"\r\n\r\n`;
    sock.write(`POST /files${query} HTTP/1.1\r\nHost: x\r\nContent-Type: ${type}\r\nContent-Length: 10000000\r\n\r\n${head}`);
    sock.write(Buffer.alloc(300_000, "n"));
    // Wait until the daemon is writing, then vanish.
    const deadline = Date.now() + 5000;
    while (!writing() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.ok(writing(), `${kind} ${target}: the daemon started writing`);
    sock.destroy();
    const gone = Date.now() + 5000;
    while (readdirSync(sub).length > 1 && Date.now() < gone) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(readdirSync(sub), ["victim.txt"], `${kind} ${target}`);
    assert.equal(readFileSync(p, "utf8"), "old content", kind);
  }
  assert.equal(d.proc.exitCode, null);
});

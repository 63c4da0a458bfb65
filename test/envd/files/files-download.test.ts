import { gunzipSync } from "node:zlib";
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, utimesSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { tempDir } from "../helpers/clients.js";

let d: Daemon;
let dir: { path: string; cleanup(): void };
let file: string;
const CONTENT = "0123456789abcdefghij"; // 20 bytes
const MTIME = new Date("2025-01-01T10:00:00Z");

before(async () => {
  d = await startDaemon();
  dir = await tempDir("files-dl");
  file = join(dir.path, "data.txt");
  writeFileSync(file, CONTENT);
  utimesSync(file, MTIME, MTIME);
});

after(async () => {
  dir.cleanup();
  await d.stop();
});

const url = (path: string, extra = "") => `${d.url}/files?path=${encodeURIComponent(path)}${extra}`;

/** A GET through node:http, so no Accept-Encoding is added and nothing is decoded. */
function get(path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    request(url(path), { headers }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts) }));
    })
      .on("error", reject)
      .end();
  });
}

test("identity download: headers of a full response", async () => {
  const r = await get(file);
  assert.equal(r.status, 200);
  assert.equal(r.body.toString(), CONTENT);
  assert.equal(r.headers["content-type"], "text/plain; charset=utf-8");
  assert.equal(r.headers["content-length"], "20");
  assert.equal(r.headers["accept-ranges"], "bytes");
  assert.equal(r.headers["last-modified"], MTIME.toUTCString());
  assert.equal(r.headers["vary"], "Accept-Encoding");
  assert.equal(r.headers["content-disposition"], "inline; filename=data.txt");
  assert.equal(r.headers["content-encoding"], undefined);
});

test("byte ranges: single, suffix, multiple, oversized, unsatisfiable, malformed", async () => {
  const one = await get(file, { range: "bytes=2-5" });
  assert.equal(one.status, 206);
  assert.equal(one.body.toString(), "2345");
  assert.equal(one.headers["content-range"], "bytes 2-5/20");
  assert.equal(one.headers["content-length"], "4");

  const suffix = await get(file, { range: "bytes=-3" });
  assert.equal(suffix.body.toString(), "hij");
  const open = await get(file, { range: "bytes=18-" });
  assert.equal(open.body.toString(), "ij");
  const whole = await get(file, { range: "bytes=-100" });
  assert.equal(whole.status, 206);
  assert.equal(whole.body.toString(), CONTENT);

  const multi = await get(file, { range: "bytes=0-1, 10-12" });
  assert.equal(multi.status, 206);
  const ct = String(multi.headers["content-type"]);
  const boundary = /^multipart\/byteranges; boundary=(\S+)$/.exec(ct)?.[1];
  assert.ok(boundary, ct);
  assert.equal(Number(multi.headers["content-length"]), multi.body.length);
  const text = multi.body.toString();
  assert.equal(
    text,
    `--${boundary}\r\nContent-Range: bytes 0-1/20\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n01` +
      `\r\n--${boundary}\r\nContent-Range: bytes 10-12/20\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nabc` +
      `\r\n--${boundary}--\r\n`,
  );

  const over = await get(file, { range: "bytes=0-19, 0-19" });
  assert.equal(over.status, 200, "ranges larger than the file are ignored");
  assert.equal(over.body.toString(), CONTENT);

  const beyond = await get(file, { range: "bytes=50-60" });
  assert.equal(beyond.status, 416);
  assert.equal(beyond.headers["content-range"], "bytes */20");
  assert.deepEqual(JSON.parse(beyond.body.toString()), { code: 416, message: "invalid range: failed to overlap" });
  const bad = await get(file, { range: "bytes=x-y" });
  assert.equal(bad.status, 416);
});

test("conditional requests: 304, 412, If-Range", async () => {
  const notModified = await get(file, { "if-modified-since": MTIME.toUTCString() });
  assert.equal(notModified.status, 304);
  assert.equal(notModified.body.length, 0);
  assert.equal(notModified.headers["last-modified"], MTIME.toUTCString());
  const modified = await get(file, { "if-modified-since": new Date(MTIME.getTime() - 3600_000).toUTCString() });
  assert.equal(modified.status, 200);
  assert.equal((await get(file, { "if-none-match": "*" })).status, 304);

  const failed = await get(file, { "if-unmodified-since": new Date(MTIME.getTime() - 3600_000).toUTCString() });
  assert.equal(failed.status, 412);
  assert.equal((await get(file, { "if-unmodified-since": MTIME.toUTCString() })).status, 200);
  assert.equal((await get(file, { "if-match": '"some-etag"' })).status, 412);

  const rangeKept = await get(file, { range: "bytes=0-0", "if-range": MTIME.toUTCString() });
  assert.equal(rangeKept.status, 206);
  const rangeDropped = await get(file, { range: "bytes=0-0", "if-range": new Date(0).toUTCString() });
  assert.equal(rangeDropped.status, 200);
  assert.equal(rangeDropped.body.toString(), CONTENT);
});

test("Accept-Encoding: gzip chosen, 406 only when nothing is acceptable, ranges force identity", async () => {
  const gz = await get(file, { "accept-encoding": "gzip, deflate" });
  assert.equal(gz.headers["content-encoding"], "gzip");
  assert.equal(gz.headers["content-length"], undefined);
  assert.equal(gz.headers["vary"], "Accept-Encoding");
  assert.equal((await get(file, { "accept-encoding": "deflate, br" })).headers["content-encoding"], undefined);
  assert.equal((await get(file, { "accept-encoding": "gzip;q=0.5, identity" })).headers["content-encoding"], undefined);
  assert.equal((await get(file, { "accept-encoding": "*, identity;q=0" })).headers["content-encoding"], "gzip");

  for (const header of ["br, identity;q=0", "*;q=0"]) {
    const r = await get(file, { "accept-encoding": header });
    assert.equal(r.status, 406, header);
    assert.deepEqual(JSON.parse(r.body.toString()), {
      code: 406,
      message: "error parsing Accept-Encoding: no acceptable encoding found, supported: [gzip]",
    });
  }
  const ranged = await get(file, { "accept-encoding": "gzip", range: "bytes=0-2" });
  assert.equal(ranged.status, 206);
  assert.equal(ranged.headers["content-encoding"], undefined);
  assert.equal(ranged.body.toString(), "012");
  const refused = await get(file, { "accept-encoding": "gzip, identity;q=0", range: "bytes=0-2" });
  assert.equal(refused.status, 406);
  assert.equal(JSON.parse(refused.body.toString()).message, "identity encoding not acceptable for Range or conditional request");
});

test("already-compressed formats keep gzip when it is preferred, as stored blocks (not deflated again)", async () => {
  const png = join(dir.path, "pic.png");
  writeFileSync(png, Buffer.alloc(4096, 7));
  const res = await get(png, { "accept-encoding": "gzip, deflate" });
  assert.equal(res.status, 200);
  assert.equal(res.headers["content-encoding"], "gzip");
  assert.deepEqual(gunzipSync(res.body), Buffer.alloc(4096, 7));
  // 4096 equal bytes would deflate to a few dozen; stored, they keep their size plus the framing.
  assert.ok(res.body.length > 4096, `stored, not deflated: ${res.body.length} bytes`);
  const plain = await get(png, { "accept-encoding": "identity" });
  assert.equal(plain.headers["content-encoding"], undefined);
  assert.equal(plain.headers["content-length"], "4096");
});

test("Content-Type: from the raw path's extension, else sniffed; gzip never sniffs", async () => {
  writeFileSync(join(dir.path, "plain"), "just text\n");
  writeFileSync(join(dir.path, "binary"), Buffer.from([0, 1, 2, 3, 4]));
  writeFileSync(join(dir.path, "page.html"), "<p>hi</p>");
  assert.equal((await get(join(dir.path, "plain"))).headers["content-type"], "text/plain; charset=utf-8");
  assert.equal((await get(join(dir.path, "binary"))).headers["content-type"], "application/octet-stream");
  assert.equal((await get(join(dir.path, "page.html"))).headers["content-type"], "text/html; charset=utf-8");
  assert.equal((await get(join(dir.path, "plain"), { "accept-encoding": "gzip" })).headers["content-type"], "application/octet-stream");
});

test("Content-Disposition forms: token, quoted, RFC 2231", async () => {
  const names: Array<[string, string]> = [
    [".env", "inline; filename=.env"],
    ["my document.pdf", 'inline; filename="my document.pdf"'],
    ['file"name.txt', 'inline; filename="file\\"name.txt"'],
    ["文档.pdf", "inline; filename*=utf-8''%E6%96%87%E6%A1%A3.pdf"],
  ];
  for (const [name, want] of names) {
    writeFileSync(join(dir.path, name), "x");
    const r = await get(join(dir.path, name));
    assert.equal(r.status, 200, name);
    assert.equal(r.headers["content-disposition"], want);
  }
});

test("errors: 404, directory, bad paths, unknown user", async () => {
  const missing = join(dir.path, "missing.txt");
  const r404 = await fetch(url(missing));
  assert.equal(r404.status, 404);
  assert.deepEqual(await r404.json(), { code: 404, message: `path '${missing}' does not exist` });
  assert.equal((await fetch(url(join(file, "below")))).status, 404, "a path through a file does not exist");

  const rDir = await fetch(url(dir.path));
  assert.equal(rDir.status, 400);
  assert.deepEqual(await rDir.json(), { code: 400, message: `path '${dir.path}' is a directory` });
  const home = await fetch(`${d.url}/files`);
  assert.deepEqual(await home.json(), { code: 400, message: "path '/home/user' is a directory" });

  const nul = await fetch(url("/tmp/a\0b"));
  assert.equal(nul.status, 400);
  assert.match((await nul.json()).message, /^error expanding and resolving path '\/tmp\/a\u0000b': invalid path/);
  const long = await fetch(url("/" + "a".repeat(5000)));
  assert.equal(long.status, 400);
  const tilde = await fetch(url("~root/x"));
  assert.equal(tilde.status, 400);

  const who = await fetch(url(file, "&username=nobody-here"));
  assert.equal(who.status, 401);
  assert.deepEqual(await who.json(), { code: 401, message: "error looking up user 'nobody-here': user: unknown user nobody-here" });
  assert.equal((await fetch(url(file, "&username="))).status, 401, "an explicitly empty username is looked up and fails");
  assert.equal((await fetch(url(file, "&path=/etc/hostname"))).status, 400, "repeated path parameter");
  assert.equal((await fetch(url(file), { method: "HEAD" })).status, 405);
});

test("paths resolve per user: relative to home, ~, and as root", async () => {
  const sub = join("/home/user", `envd-dl-${process.pid}`);
  mkdirSync(sub, { recursive: true });
  try {
    writeFileSync(join(sub, "rel.txt"), "relative");
    assert.equal(await (await fetch(url(`envd-dl-${process.pid}/rel.txt`))).text(), "relative");
    assert.equal(await (await fetch(url(`~/envd-dl-${process.pid}/rel.txt`))).text(), "relative");
    assert.equal((await fetch(url(`envd-dl-${process.pid}/rel.txt`, "&username=root"))).status, 404, "root's home is /root");
  } finally {
    (await import("node:fs")).rmSync(sub, { recursive: true, force: true });
  }
});

test("files of unknown size (procfs) stream until EOF; devices are refused", async () => {
  const r = await get("/proc/self/status");
  assert.equal(r.status, 200);
  assert.match(r.body.toString(), /^Name:/);
  assert.equal(r.headers["content-length"], undefined);
  const nul = await get("/dev/null");
  assert.equal(nul.status, 400);
  assert.match(nul.body.toString(), /path '\/dev\/null' is not a regular file/);
});

test("a client that disconnects mid-download does not disturb the daemon", async () => {
  const big = join(dir.path, "big.bin");
  writeFileSync(big, Buffer.alloc(32 * 1024 * 1024, 7));
  await new Promise<void>((resolve, reject) => {
    const req = request(url(big), (res) => {
      res.once("data", () => {
        req.destroy();
        resolve();
      });
    });
    req.on("error", () => undefined);
    req.end();
    setTimeout(() => reject(new Error("no data")), 5000);
  });
  const again = await get(file);
  assert.equal(again.body.toString(), CONTENT);
  assert.equal(d.proc.exitCode, null);
});

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { ROOT } from "../helpers/daemon.js";
import { identityRejected, negotiateEncoding, requestCoding } from "../../../src/envd/files/encoding.js";
import { inlineDisposition } from "../../../src/envd/files/disposition.js";
import { evaluatePreconditions } from "../../../src/envd/files/conditional.js";
import { byteRanges, planMultipart, RangeNotSatisfiable } from "../../../src/envd/files/ranges.js";
import { metadataFromHeaders } from "../../../src/envd/files/metadata.js";
import { extensionOf, sniffContentType, typeByExtension } from "../../../src/envd/files/content-type.js";
import { xattrErrno } from "../../../src/envd/files/xattr-errors.js";
import { HttpError } from "../../../src/envd/http/errors.js";

const status = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return err instanceof HttpError ? `${err.status} ${err.message}` : String(err);
  }
  return "ok";
};

test("Accept-Encoding negotiation follows the reference table", () => {
  const cases: Array<[string | undefined, string]> = [
    [undefined, "identity"],
    ["", "identity"],
    ["gzip", "gzip"],
    ["GZIP", "gzip"],
    ["gzip, deflate", "gzip"],
    ["gzip, deflate, br", "gzip"],
    ["deflate, br", "identity"],
    ["gzip;q=0.5, identity;q=1.0", "identity"],
    ["identity;q=0.5, gzip;q=0.5", "identity"],
    ["*", "identity"],
    ["*, identity;q=0", "gzip"],
    ["*;q=0, gzip", "gzip"],
    ["gzip;q=0", "identity"],
    ["gzip;q=abc", "gzip"],
  ];
  for (const [header, want] of cases) assert.equal(negotiateEncoding(header), want, String(header));
  const refused = "406 error parsing Accept-Encoding: no acceptable encoding found, supported: [gzip]";
  assert.equal(status(() => negotiateEncoding("br, identity;q=0")), refused);
  assert.equal(status(() => negotiateEncoding("*;q=0")), refused);
  assert.equal(identityRejected("*;q=0, identity;q=0.1"), false);
  assert.equal(identityRejected("identity;q=0"), true);
});

test("request Content-Encoding accepts gzip in any case with a q suffix and refuses others", () => {
  assert.equal(requestCoding(undefined), "identity");
  assert.equal(requestCoding("identity"), "identity");
  assert.equal(requestCoding("GZip;q=1.0"), "gzip");
  assert.equal(status(() => requestCoding("br")), "400 error decompressing request body: unsupported Content-Encoding: br, supported: [gzip]");
});

test("Content-Disposition uses token, quoted and RFC 2231 forms", () => {
  assert.equal(inlineDisposition("test.txt"), "inline; filename=test.txt");
  assert.equal(inlineDisposition(".env"), "inline; filename=.env");
  assert.equal(inlineDisposition("my document.pdf"), 'inline; filename="my document.pdf"');
  assert.equal(inlineDisposition('file"name.txt'), 'inline; filename="file\\"name.txt"');
  assert.equal(inlineDisposition("file\\name.txt"), 'inline; filename="file\\\\name.txt"');
  assert.equal(inlineDisposition("文档.pdf"), "inline; filename*=utf-8''%E6%96%87%E6%A1%A3.pdf");
  assert.equal(inlineDisposition("é x*.txt"), "inline; filename*=utf-8''%C3%A9%20x%2A.txt");
});

test("preconditions: If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since, If-Range", () => {
  const mtime = Date.parse("Wed, 01 Jan 2025 10:00:00 GMT") + 123; // sub-second part is ignored
  const same = "Wed, 01 Jan 2025 10:00:00 GMT";
  const before = "Wed, 01 Jan 2025 09:00:00 GMT";
  assert.deepEqual(evaluatePreconditions({}, mtime), { status: 200, range: undefined });
  assert.deepEqual(evaluatePreconditions({ ifModifiedSince: same }, mtime), { status: 304 });
  assert.deepEqual(evaluatePreconditions({ ifModifiedSince: before }, mtime), { status: 200, range: undefined });
  assert.deepEqual(evaluatePreconditions({ ifModifiedSince: "garbage" }, mtime), { status: 200, range: undefined });
  assert.deepEqual(evaluatePreconditions({ ifUnmodifiedSince: before }, mtime), { status: 412 });
  assert.deepEqual(evaluatePreconditions({ ifUnmodifiedSince: same }, mtime), { status: 200, range: undefined });
  assert.deepEqual(evaluatePreconditions({ ifMatch: '"abc"' }, mtime), { status: 412 });
  assert.deepEqual(evaluatePreconditions({ ifMatch: "*", ifUnmodifiedSince: before }, mtime), { status: 200, range: undefined });
  assert.deepEqual(evaluatePreconditions({ ifNoneMatch: "*" }, mtime), { status: 304 });
  // An If-None-Match that does not match disables If-Modified-Since.
  assert.deepEqual(evaluatePreconditions({ ifNoneMatch: '"x"', ifModifiedSince: same }, mtime), { status: 200, range: undefined });
  assert.deepEqual(evaluatePreconditions({ range: "bytes=0-1", ifRange: same }, mtime), { status: 200, range: "bytes=0-1" });
  assert.deepEqual(evaluatePreconditions({ range: "bytes=0-1", ifRange: before }, mtime), { status: 200, range: undefined });
  assert.deepEqual(evaluatePreconditions({ range: "bytes=0-1", ifRange: '"etag"' }, mtime), { status: 200, range: undefined });
});

test("byte ranges: single, multiple, suffix, oversized and unsatisfiable", () => {
  assert.deepEqual(byteRanges("bytes=0-4", 10), [{ start: 0, end: 4 }]);
  assert.deepEqual(byteRanges("bytes=5-", 10), [{ start: 5, end: 9 }]);
  assert.deepEqual(byteRanges("bytes=-3", 10), [{ start: 7, end: 9 }]);
  assert.deepEqual(byteRanges("bytes=-30", 10), [{ start: 0, end: 9 }]);
  assert.deepEqual(byteRanges("bytes=0-1, 4-5", 10), [{ start: 0, end: 1 }, { start: 4, end: 5 }]);
  assert.deepEqual(byteRanges("bytes=8-20", 10), [{ start: 8, end: 9 }]);
  assert.equal(byteRanges("bytes=0-9, 0-9", 10), undefined); // more than the file: ignored
  assert.throws(() => byteRanges("bytes=20-30", 10), RangeNotSatisfiable);
  assert.equal(status(() => byteRanges("bytes=abc", 10)), "416 invalid range");
  assert.equal(status(() => byteRanges("items=0-1", 10)), "416 invalid range");
  const plan = planMultipart([{ start: 0, end: 1 }, { start: 4, end: 5 }], 10, "text/plain");
  const boundary = plan.contentType.split("boundary=")[1];
  assert.match(plan.parts[0].head, new RegExp(`^--${boundary}\\r\\nContent-Range: bytes 0-1/10\\r\\nContent-Type: text/plain\\r\\n\\r\\n$`));
  assert.match(plan.parts[1].head, /^\r\n--/);
  assert.equal(plan.length, Buffer.byteLength(plan.parts[0].head + plan.parts[1].head + plan.tail) + 4);
});

test("metadata headers: lower-cased keys, first value wins, reference limits", () => {
  assert.deepEqual(metadataFromHeaders({ "x-metadata-Author": ["Me", "You"], "x-metadata-": ["x"], other: ["y"] }), { author: "Me" });
  assert.deepEqual(metadataFromHeaders({}), {});
  const bad = (h: Record<string, string[]>) => status(() => metadataFromHeaders(h));
  assert.match(bad({ ["x-metadata-" + "k".repeat(247)]: ["v"] }), /^400 invalid metadata: key .* longer than 246 bytes$/);
  assert.equal(bad({ ["x-metadata-" + "k".repeat(246)]: ["v"] }), "ok");
  assert.match(bad({ "x-metadata-a": ["caf\u00e9"] }), /^400 invalid metadata: value of key 'a'/);
  assert.match(bad({ "x-metadata-a": ["v".repeat(4000)], "x-metadata-b": ["v".repeat(100)] }), /^400 invalid metadata: total size/);
});

test("content type from the raw path's extension, else sniffed", () => {
  assert.equal(extensionOf("/a/b.tar.gz"), ".gz");
  assert.equal(extensionOf("/a.d/b"), "");
  assert.equal(extensionOf(".env"), ".env");
  assert.equal(typeByExtension("notes.txt"), "text/plain; charset=utf-8");
  assert.equal(typeByExtension("data.json"), "application/json; charset=utf-8");
  assert.equal(typeByExtension("noext"), undefined);
  assert.equal(sniffContentType(Buffer.from("hello\n")), "text/plain; charset=utf-8");
  assert.equal(sniffContentType(Buffer.alloc(0)), "text/plain; charset=utf-8");
  assert.equal(sniffContentType(Buffer.from([0, 1, 2, 3])), "application/octet-stream");
  assert.equal(sniffContentType(Buffer.from("%PDF-1.7")), "application/pdf");
  assert.equal(sniffContentType(Buffer.from("  <html><body>")), "text/html; charset=utf-8");
});

test("the generated extension table gives what mime-types gives for every extension mime-db knows, and is not stale", () => {
  const mime = createRequire(import.meta.url)("mime-types") as typeof import("mime-types");
  const exts = Object.keys(mime.types);
  assert.ok(exts.length > 1000, `mime-db lists ${exts.length} extensions`);
  for (const ext of exts) {
    const want = mime.contentType(`.${ext}`) || undefined;
    assert.equal(typeByExtension(`/d/file.${ext}`), want, ext);
    assert.equal(typeByExtension(`/d/FILE.${ext.toUpperCase()}`), want, `${ext} in upper case`);
  }
  for (const odd of ["/d/file.", "/d/.", "/d/file.nosuchext", "/d.txt/file"]) assert.equal(typeByExtension(odd), mime.contentType(extensionOf(odd)) || undefined, odd);
  execFileSync(process.execPath, [join(ROOT, "scripts", "gen-mime-table.mjs"), "--check"], { stdio: "pipe" });
});

test("xattr errno is read from @napi-rs/xattr messages", () => {
  assert.equal(xattrErrno(new Error("No space left on device (os error 28)")), 28);
  assert.equal(xattrErrno(new Error("something else")), undefined);
});

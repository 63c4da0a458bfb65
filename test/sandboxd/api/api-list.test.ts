import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { statusOf } from "../../../src/sandboxd/api/errors.js";
import { decodeCursor, encodeCursor, matchesMetadata, page, parseMetadataFilter, sortRows } from "../../../src/sandboxd/sandboxes/list.js";
import type { SandboxRow } from "../../../src/sandboxd/store/sandboxes.js";

/** The metadata query value as the server's URL parser hands it over after the SDK's three encodings. */
function sdkEncodedOnceDecoded(pairs: Record<string, string>): string {
  const inner = new URLSearchParams(Object.fromEntries(Object.entries(pairs).map(([k, v]) => [encodeURIComponent(k), encodeURIComponent(v)]))).toString();
  return new URLSearchParams("metadata=" + encodeURIComponent(inner)).get("metadata")!;
}

function row(id: string, startedAt: string, metadata: Record<string, string> = {}): SandboxRow {
  return {
    id, teamID: "t", templateID: "x", state: "running", startedAt, endAt: startedAt, metadata, autoPause: false, secure: false, trafficToken: null,
    network: {}, allowInternetAccess: true, ip: null, envdPort: null, envdVersion: "0.6.13", cpuCount: 1, memoryMB: 1, diskSizeMB: 1,
  };
}

describe("v2 listing rules", () => {
  test("metadata filters round-trip the SDK's encoding for & = % + spaces and non-ASCII, keys included", () => {
    const pairs = { "k&=%": "v=1&2%3+4 5", ключ: "значение", plain: "x" };
    assert.deepEqual(parseMetadataFilter(sdkEncodedOnceDecoded(pairs)), Object.entries(pairs));
    assert.deepEqual(parseMetadataFilter(null), []);
    for (const bad of ["a", "a=b=c", "%zz=1", "a=1&b"]) {
      assert.throws(() => parseMetadataFilter(bad), (e: Error) => statusOf(e) === 400, bad);
    }
    const r = row("a", "2026-01-01T00:00:00.000Z", { a: "1", b: "2" });
    assert.equal(matchesMetadata(r, [["a", "1"]]), true);
    assert.equal(matchesMetadata(r, [["a", "1"], ["b", "3"]]), false);
    assert.equal(matchesMetadata(row("b", "2026-01-01T00:00:00.000Z"), [["a", "1"]]), false);
    assert.equal(matchesMetadata(row("b", "2026-01-01T00:00:00.000Z"), []), true);
  });

  test("pages follow (startedAt DESC, id ASC) and its reverse through equal timestamps, each row once", () => {
    const rows = [row("c", "2026-01-01T00:00:01.000Z"), row("a", "2026-01-01T00:00:01.000Z"), row("b", "2026-01-01T00:00:01.000Z"), row("z", "2026-01-01T00:00:02.000Z"), row("y", "2026-01-01T00:00:00.500Z")];
    for (const order of ["desc", "asc"] as const) {
      const sorted = sortRows(rows, order);
      const seen: string[] = [];
      let cursor: { ts: number; id: string } | undefined;
      for (;;) {
        const p = page(sorted, order, 2, cursor);
        seen.push(...p.items.map((r) => r.id));
        if (!p.next) break;
        cursor = decodeCursor(p.next, order);
      }
      assert.deepEqual(seen, order === "desc" ? ["z", "a", "b", "c", "y"] : ["y", "c", "b", "a", "z"]);
    }
    assert.equal(page(sortRows(rows, "desc"), "desc", 5).next, undefined, "no token when nothing is left");
  });

  test("cursors: base64url with padding, __asc only for ascending, the other order or garbage is 400 Invalid next token", () => {
    const r = row("abc", "2026-01-01T00:00:01.250Z");
    const desc = encodeCursor(r, "desc");
    assert.equal(Buffer.from(desc, "base64url").toString(), "2026-01-01T00:00:01.250Z__abc");
    assert.equal(desc.length % 4, 0);
    assert.equal(Buffer.from(encodeCursor(r, "asc"), "base64url").toString(), "2026-01-01T00:00:01.250Z__abc__asc");
    assert.deepEqual(decodeCursor(desc, "desc"), { ts: Date.parse(r.startedAt), id: "abc" });
    for (const [token, order] of [[desc, "asc"], [encodeCursor(r, "asc"), "desc"], ["!!", "desc"], [Buffer.from("nope__abc").toString("base64url"), "desc"], [Buffer.from("2026-01-01T00:00:00Z__A-B").toString("base64url"), "desc"]] as const) {
      assert.throws(() => decodeCursor(token, order), (e: Error) => statusOf(e) === 400 && e.message === "Invalid next token", token);
    }
  });
});

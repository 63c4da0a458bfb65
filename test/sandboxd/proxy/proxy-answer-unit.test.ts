import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { finalStatus, relayableHeaders, relayableRawLines, relayableTrailers } from "../../../src/sandboxd/proxy/answer.js";

describe("what the proxy relays of a sandbox's answer", () => {
  test("final statuses are 200-599 integers only", () => {
    for (const ok of [200, 204, 304, 404, 599, "200"]) assert.ok(finalStatus(ok) !== undefined, String(ok));
    for (const bad of [0, 99, 100, 101, 103, 199, 600, 999, 200.5, -200, "2000", "abc", undefined, null, NaN]) assert.equal(finalStatus(bad), undefined, String(bad));
  });

  test("headers: hop-by-hop and HTTP/2-forbidden fields dropped, bad names or values refuse the block", () => {
    assert.deepEqual(relayableHeaders({ "content-type": "text/plain", connection: "close, x-hop", "x-hop": "1", "keep-alive": "5", upgrade: "h2c", te: "trailers", "x-kept": "yes", "set-cookie": ["a=1", "b=2"] }), {
      "content-type": "text/plain", "x-kept": "yes", "set-cookie": ["a=1", "b=2"],
    });
    assert.deepEqual(relayableHeaders({ "x-list": ["a", "b"] }), { "x-list": "a, b" });
    assert.equal(relayableHeaders({ "x-bad": "a\u0000b" }), undefined);
    assert.equal(relayableHeaders({ "x-bad": "a\rb" }), undefined);
    assert.equal(relayableHeaders({ "x bad": "v" }), undefined);
    assert.equal(relayableHeaders({ "x-obj": { a: 1 } as unknown as string }), undefined);
    assert.equal(relayableHeaders({ "content-length": "5, 5" }), undefined);
    assert.equal(relayableHeaders({ "content-length": "-1" }), undefined);
    const many: Record<string, string> = {};
    for (let i = 0; i < 300; i++) many[`x-${i}`] = "v";
    assert.equal(relayableHeaders(many), undefined);
    assert.equal(relayableHeaders({ "x-big": "v".repeat(70 * 1024) }), undefined);
  });

  test("trailers: bad and framing fields dropped one by one, the rest kept", () => {
    assert.deepEqual(relayableTrailers({ "grpc-status": "0", "x-bad": "a\u0000", connection: "x", "content-length": "5", ":status": "200" }), { "grpc-status": "0" });
    assert.deepEqual(relayableTrailers(undefined), {});
  });

  test("raw lines of an upgrade answer: case and repeats kept, a bad field refuses them", () => {
    assert.deepEqual(relayableRawLines(["Upgrade", "websocket", "X-A", "1", "X-A", "2"], () => false), ["Upgrade: websocket", "X-A: 1", "X-A: 2"]);
    assert.deepEqual(relayableRawLines(["Transfer-Encoding", "chunked", "X-A", "1"], (n) => n === "transfer-encoding"), ["X-A: 1"]);
    assert.equal(relayableRawLines(["X-A", "a\u0000b"], () => false), undefined);
    assert.equal(relayableRawLines(["X A", "b"], () => false), undefined);
  });
});

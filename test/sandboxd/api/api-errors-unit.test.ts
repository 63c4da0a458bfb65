import { test } from "node:test";
import assert from "node:assert/strict";
import { errorAnswer, STATUS_OF, statusOf } from "../../../src/sandboxd/api/errors.js";
import {
  Conflict, Forbidden, invalid, Invalid, LengthRequired, LimitExceeded, NotFound, OperationFailed, PayloadTooLarge, sandboxNotFound, Unauthenticated, Unavailable,
} from "../../../src/sandboxd/errors.js";

test("each domain error is answered with its HTTP status and E2B's {code, message}", () => {
  const cases: [Error, number][] = [
    [new Invalid("bad"), 400],
    [new Unauthenticated("who"), 401],
    [new Forbidden("not yours"), 403],
    [new NotFound("gone"), 404],
    [new Conflict("already"), 409],
    [new LengthRequired("length"), 411],
    [new PayloadTooLarge("big"), 413],
    [new LimitExceeded("too many"), 429],
    [new OperationFailed("broke"), 500],
    [new Unavailable("off"), 503],
  ];
  for (const [err, status] of cases) {
    assert.deepEqual(errorAnswer(err), { status, body: { code: status, message: err.message } }, err.constructor.name);
    assert.equal(statusOf(err), status);
  }
  // one case per kind: the table has no kind without a class
  assert.deepEqual(new Set(cases.map(([, s]) => s)), new Set(Object.values(STATUS_OF)));
});

test("an error code travels as error_code; E2B's messages are kept word for word", () => {
  const failed = new OperationFailed("Failed to create sandbox: start failed: no", "sandbox_create_failed");
  assert.deepEqual(errorAnswer(failed).body, { code: 500, message: "Failed to create sandbox: start failed: no", error_code: "sandbox_create_failed" });
  assert.deepEqual(errorAnswer(invalid('field "x" must be a string')).body, { code: 400, message: 'validation error: field "x" must be a string' });
  assert.deepEqual(errorAnswer(sandboxNotFound("abc")).body, { code: 404, message: `Sandbox "abc" doesn't exist or you don't have access to it` });
});

test("anything that is not a domain error is a 500 that names no internals", () => {
  for (const err of [new Error("ENOENT: /var/lib/secret"), new TypeError("x is undefined"), "a string", undefined]) {
    const a = errorAnswer(err);
    assert.deepEqual(a, { status: 500, body: { code: 500, message: "Internal error while handling the request" } });
  }
});

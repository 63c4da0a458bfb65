/**
 * The one table from a domain error's kind to the HTTP status the control API answers with, and
 * the E2B error body (`{code, message[, error_code]}`) it carries.
 */
import { DomainError, type ErrorKind } from "../errors.js";

/** The HTTP status of each kind of domain error. */
export const STATUS_OF: Readonly<Record<ErrorKind, number>> = {
  invalid: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  length_required: 411,
  too_large: 413,
  limit: 429,
  failed: 500,
  unavailable: 503,
};

/** The status and E2B body of an error: a domain error by its kind, anything else as a 500 that names no internals. */
export function errorAnswer(err: unknown): { status: number; body: { code: number; message: string; error_code?: string } } {
  if (!(err instanceof DomainError)) return { status: 500, body: { code: 500, message: "Internal error while handling the request" } };
  const status = STATUS_OF[err.kind];
  return { status, body: { code: status, message: err.message, ...(err.errorCode ? { error_code: err.errorCode } : {}) } };
}

/** The HTTP status an error is answered with. */
export function statusOf(err: unknown): number {
  return errorAnswer(err).status;
}

import type { ServerResponse } from "node:http";
import type { Http2ServerResponse } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";

/** Any response object our plain routes write to (HTTP/1.1 or HTTP/2 compat). */
export type AnyResponse = ServerResponse | Http2ServerResponse;

/** The one Connect code → HTTP status table, as the Connect protocol defines it. */
const statusOf: Record<Code, number> = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 400,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

/** Maps a Connect code to the HTTP status used for it on plain routes. */
export function httpStatusOf(code: Code): number {
  return statusOf[code] ?? 500;
}

/**
 * An error for a plain HTTP route whose status is not expressible as a Connect code
 * (406, 416, 507, ...). Thrown by route handlers, written by writeError.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "HttpError";
  }
}

/** Errno → Connect code, the single place where Node's error codes are interpreted. */
export function codeOfErrno(err: unknown): Code {
  switch ((err as NodeJS.ErrnoException | undefined)?.code) {
    case "ENOENT":
      return Code.NotFound;
    case "EEXIST":
    case "ENOTEMPTY":
      return Code.AlreadyExists;
    case "EACCES":
    case "EPERM":
    case "EROFS":
      return Code.PermissionDenied;
    case "ENOTDIR":
    case "EISDIR":
    case "EINVAL":
    case "ENAMETOOLONG":
    case "EXDEV":
      return Code.InvalidArgument;
    case "ELOOP":
      return Code.FailedPrecondition;
    case "ENOSPC":
    case "EDQUOT":
    case "EMFILE":
    case "ENFILE":
      return Code.ResourceExhausted;
    default:
      return Code.Internal;
  }
}

/** Wraps a Node error as a ConnectError with a context message, keeping the cause. */
/**
 * The error an RPC answers for `err`: itself when it is a ConnectError, else "internal error"
 * (cause kept), worded as connect-node words it so every path of a call answers the same.
 */
export function rpcError(err: unknown): ConnectError {
  return err instanceof ConnectError ? err : new ConnectError("internal error", Code.Internal, undefined, undefined, err);
}

export function fromErrno(err: unknown, message: string, code?: Code): ConnectError {
  if (err instanceof ConnectError) return err;
  const detail = err instanceof Error ? err.message : String(err);
  return new ConnectError(`${message}: ${detail}`, code ?? codeOfErrno(err), undefined, undefined, err);
}

/** Turns anything thrown into the HTTP status and message we send on plain routes. */
export function describeError(err: unknown): { status: number; message: string } {
  if (err instanceof HttpError) return { status: err.status, message: err.message };
  if (err instanceof ConnectError) return { status: httpStatusOf(err.code), message: err.rawMessage };
  if ((err as NodeJS.ErrnoException)?.code === "ENOSPC") return { status: 507, message: "not enough disk space available" };
  const message = err instanceof Error ? err.message : String(err);
  return { status: 500, message: message || "internal error" };
}

/** The one writer of plain-route errors: `{"code":<status>,"message":"..."}` plus a newline. */
export function writeError(res: AnyResponse, err: unknown): void {
  const { status, message } = describeError(err);
  if (res.headersSent) {
    // Too late for a status line: cut the body so the client sees a truncated transfer, not success.
    res.destroy();
    return;
  }
  const body = JSON.stringify({ code: status, message }) + "\n";
  res.statusCode = status;
  res.setHeader("Content-Type", "application/json; charset=utf-8");
  res.setHeader("X-Content-Type-Options", "nosniff");
  res.setHeader("Content-Length", Buffer.byteLength(body));
  res.end(body);
}

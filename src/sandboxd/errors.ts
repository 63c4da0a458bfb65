/**
 * The failures sandboxd's services report, by kind and with the message a user reads. Services
 * throw these and know no HTTP: only api/ turns a kind into a status and E2B's `{code, message}`.
 * Any other error a service lets escape is a fault, answered as an internal error.
 */

/** What went wrong, as far as a caller can act on it. */
export type ErrorKind =
  | "invalid"
  | "unauthenticated"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "length_required"
  | "too_large"
  | "limit"
  | "failed"
  | "unavailable";

/** A failure a service reports to its caller, with the message (E2B's wording where E2B has one) to show. */
export abstract class DomainError extends Error {
  /** The kind of failure. */
  abstract readonly kind: ErrorKind;

  constructor(
    message: string,
    /** A machine-readable name of the failure, for the few E2B names (`error_code`). */
    readonly errorCode?: string,
  ) {
    super(message);
  }
}

/** The input is malformed or asks for something this server refuses (bad request). */
export class Invalid extends DomainError {
  readonly kind = "invalid";
}

/** The caller sent no credential, or one that is unknown. */
export class Unauthenticated extends DomainError {
  readonly kind = "unauthenticated";
}

/** The caller is known but may not do this (another team's template or team). */
export class Forbidden extends DomainError {
  readonly kind = "forbidden";
}

/** The thing named does not exist, or the caller may not learn that it does. */
export class NotFound extends DomainError {
  readonly kind = "not_found";
}

/** The thing is in a state the operation cannot run in (already running, name taken, in use). */
export class Conflict extends DomainError {
  readonly kind = "conflict";
}

/** A streamed input came without the length it must declare. */
export class LengthRequired extends DomainError {
  readonly kind = "length_required";
}

/** A streamed input is larger than this server takes. */
export class PayloadTooLarge extends DomainError {
  readonly kind = "too_large";
}

/** A quota, budget or rate limit is reached; the caller may retry once something is freed. */
export class LimitExceeded extends DomainError {
  readonly kind = "limit";
}

/** The operation was accepted but failed on the way (its message says which step). */
export class OperationFailed extends DomainError {
  readonly kind = "failed";
}

/** The part of the server the operation needs is not running. */
export class Unavailable extends DomainError {
  readonly kind = "unavailable";
}

/** An Invalid with the API validator's prefix ("validation error: …"), as E2B words a malformed request. */
export function invalid(what: string): Invalid {
  return new Invalid(`validation error: ${what}`);
}

/** E2B's NotFound for a sandbox that is unknown or another team's. */
export function sandboxNotFound(id: string): NotFound {
  return new NotFound(`Sandbox "${id}" doesn't exist or you don't have access to it`);
}

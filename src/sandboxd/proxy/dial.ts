/** Errors that mean nothing accepts connections on the sandbox's port (the "port is not open" 502). */
const DIAL_FAILURES = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "ETIMEDOUT", "EHOSTDOWN", "ECONNRESET", "EPIPE"]);

/** Whether an upstream error before any answer means the port is closed (else it is a broken sandbox). */
export function isDialFailure(err: unknown): boolean {
  const e = err as { code?: string; cause?: { code?: string } } | undefined;
  return DIAL_FAILURES.has(e?.code ?? "") || DIAL_FAILURES.has(e?.cause?.code ?? "");
}

/** An error carrying a Node errno code, for timeouts the proxy decides itself. */
export function timeoutError(what: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(`${what} timed out`);
  err.code = "ETIMEDOUT";
  return err;
}

/** Timeouts and bounds of the proxy, in one place. */
export interface ProxyLimits {
  /** A sandbox port that does not accept a connection within this is "not open". */
  connectTimeoutMs: number;
  /**
   * Pooled upstream connections idle this long are closed (h2c sessions gracefully: their
   * streams finish), so pools of killed sandboxes do not linger.
   */
  idleTimeoutMs: number;
  /** Requests (and WebSockets) in flight per sandbox; more get a 429. */
  maxPerSandbox: number;
}

/** Defaults: a local dial answers in well under 5 s; a new upstream connection costs well under a millisecond. */
export const DEFAULT_LIMITS: ProxyLimits = { connectTimeoutMs: 5_000, idleTimeoutMs: 60_000, maxPerSandbox: 1_000 };

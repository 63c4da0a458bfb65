import { crypto } from "../platform/crypto.js";

/** Constant-time string equality: both sides are hashed first so lengths never leak. */
export function safeEqual(a: string, b: string): boolean {
  const ha = crypto().createHash("sha256").update(a, "utf8").digest();
  const hb = crypto().createHash("sha256").update(b, "utf8").digest();
  return crypto().timingSafeEqual(ha, hb);
}

/** Holds the access token set by /init; never logged, compared only in constant time. */
export class AccessToken {
  private value: string | undefined;

  /** Whether a token is set (the sandbox is secured). */
  get isSet(): boolean {
    return this.value !== undefined;
  }

  /** Replaces the token; undefined clears it. */
  set(token: string | undefined): void {
    this.value = token === undefined || token === "" ? undefined : token;
  }

  /** Constant-time comparison with the current token; false when none is set. */
  equals(candidate: string | undefined): boolean {
    if (this.value === undefined || candidate === undefined) return false;
    return safeEqual(this.value, candidate);
  }

  /** The raw token, for computing signatures only. */
  reveal(): string | undefined {
    return this.value;
  }
}

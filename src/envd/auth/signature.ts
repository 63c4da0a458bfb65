import { crypto } from "../platform/crypto.js";
import { normalize } from "node:path";
import { HttpError } from "../http/errors.js";
import { safeEqual, type AccessToken } from "./token.js";

/** `v1_` + unpadded base64 SHA-256 of `path:operation:user:token[:expiration]` (§3.4). */
export function fileSignature(path: string, operation: "read" | "write", user: string, token: string, expiration?: number): string {
  let raw = `${path}:${operation}:${user}:${token}`;
  if (expiration !== undefined) raw += `:${expiration}`;
  return "v1_" + crypto().createHash("sha256").update(raw, "utf8").digest("base64").replace(/=+$/, "");
}

/** The query and header facts a /files request is authorised with. */
export interface SigningInput {
  headerToken: string | undefined;
  path: string;
  username: string;
  signature: string | undefined;
  expiration: string | undefined;
  operation: "read" | "write";
  nowSeconds: number;
}

/** How a /files request was let in: no token is set, the token header matched, or a signed URL did. */
export type SignedBy = "open" | "token" | "signature";

/** Authorises a GET/POST /files request by header token or signed URL; throws a 401 HttpError. */
export function validateSigning(token: AccessToken, input: SigningInput): SignedBy {
  if (!token.isSet) return "open";
  if (input.headerToken) {
    if (token.equals(input.headerToken)) return "token";
    throw new HttpError(401, "access token present in header but does not match");
  }
  if (input.signature === undefined) throw new HttpError(401, "missing signature query parameter");
  let expiration: number | undefined;
  if (input.expiration !== undefined) {
    if (!/^-?\d+$/.test(input.expiration)) {
      throw new HttpError(400, `Invalid format for parameter signature_expiration: not an integer: ${JSON.stringify(input.expiration)}`);
    }
    expiration = Number(input.expiration);
  }
  const expected = fileSignature(input.path, input.operation, input.username, token.reveal() ?? "", expiration);
  if (!safeEqual(expected, input.signature)) throw new HttpError(401, "invalid signature");
  if (expiration !== undefined && expiration < input.nowSeconds) throw new HttpError(401, "signature is already expired");
  return "signature";
}

/**
 * Whether a target may be written under a write signature that names no path. Such a signature
 * (the SDK's uploadUrl() without a path) lets each multipart filename pick its target; it is
 * honoured only for targets inside the signed user's home directory, so a holder of the URL can
 * never pick a file elsewhere (`..` is resolved before the check).
 */
export function pathlessSignatureAllows(target: string, home: string): boolean {
  const t = normalize(target);
  const h = normalize(home).replace(/\/+$/, "");
  return t.startsWith(`${h}/`) && t.length > h.length + 1;
}

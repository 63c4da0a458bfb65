import { createHmac } from "node:crypto";

/** envd's access token of a secure sandbox: HMAC-SHA256(install secret, sandboxID), hex. */
export function envdAccessToken(secret: string, sandboxID: string): string {
  return createHmac("sha256", secret).update(sandboxID).digest("hex");
}

/** The token non-envd ports require when public traffic is off: HMAC-SHA256(secret, "sandbox-traffic-" + ID), hex. */
export function trafficAccessToken(secret: string, sandboxID: string): string {
  return createHmac("sha256", secret).update("sandbox-traffic-" + sandboxID).digest("hex");
}

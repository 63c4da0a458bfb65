/** How the control API's updates change a sandbox row: timeouts (E2B's rules) and network rules. */
import { Invalid } from "../errors.js";
import type { SandboxRow } from "../store/sandboxes.js";
import type { NetworkUpdate } from "./inputs.js";

/** Refuses a timeout that is not positive or longer than the team's maximum sandbox length. */
export function checkTimeoutFor(maxLengthMs: number, timeout: number): void {
  if (timeout <= 0) throw new Invalid("Timeout must be greater than 0");
  if (timeout * 1000 > maxLengthMs) throw new Invalid(`Timeout cannot be greater than ${maxLengthMs / 3600_000} hours`);
}

/**
 * E2B's KeepAliveFor: the sandbox's new end (ISO time), `timeoutS` after `now` (ms), capped at its
 * maximum length, and with `allowShorter` false never earlier than its current end.
 */
export function keptAliveUntil(row: SandboxRow, maxLengthMs: number, timeoutS: number, allowShorter: boolean, now: number): string {
  const maxEnd = Date.parse(row.startedAt) + maxLengthMs;
  if (now >= maxEnd) throw new Invalid("Max instance length exceeded");
  const wanted = Math.min(now + timeoutS * 1000, maxEnd);
  const end = allowShorter ? wanted : Math.max(Date.parse(row.endAt), wanted);
  return new Date(end).toISOString();
}

/**
 * The row after `PUT /sandboxes/{id}/network`: a full replacement of the egress fields (an omitted
 * one is cleared), while the others (public traffic, maskRequestHost) stay as created.
 */
export function withNetworkUpdate(row: SandboxRow, update: NetworkUpdate): SandboxRow {
  const { allowOut: _a, denyOut: _d, rules: _r, ...kept } = row.network;
  const network = { ...kept, ...(update.allowOut ? { allowOut: update.allowOut } : {}), ...(update.denyOut ? { denyOut: update.denyOut } : {}), ...(update.rules ? { rules: update.rules } : {}) };
  return { ...row, network, allowInternetAccess: update.allowInternetAccess ?? true };
}

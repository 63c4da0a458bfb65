import { isIP } from "node:net";
import type { Route } from "../proxy/target.js";

/** Where a request belongs, decided from its Host (and, on shared hosts, the routing headers). */
export type Destination =
  | { kind: "api" }
  | { kind: "root" }
  | { kind: "sandbox"; route: Route }
  | { kind: "bad"; message: string }
  | { kind: "unknown" };

/** The host name of a Host/:authority value: port and trailing dot removed, lower-cased, IPv6 brackets dropped. */
export function hostName(authority: string): string {
  let h = authority.trim().toLowerCase();
  if (h.startsWith("[")) {
    const end = h.indexOf("]");
    return end < 0 ? h : h.slice(1, end);
  }
  const colon = h.indexOf(":");
  if (colon >= 0) h = h.slice(0, colon);
  return h.endsWith(".") ? h.slice(0, -1) : h;
}

const PORT = /^[0-9]{1,5}$/;
const SANDBOX_ID = /^[a-z0-9]{1,64}$/;

/** A port and sandbox ID from text, or the plain-text reason E2B's proxy gives for a bad one. */
function route(portText: string, id: string): Destination {
  const port = Number(portText);
  if (!PORT.test(portText) || port < 1 || port > 65535) return { kind: "bad", message: "Invalid sandbox port" };
  if (!SANDBOX_ID.test(id)) return { kind: "bad", message: "Invalid sandbox ID" };
  return { kind: "sandbox", route: { sandboxID: id, port } };
}

/** First value of a header that may repeat. */
function first(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Classifies a request: `api.<domain>`, `<domain>`, `<port>-<id>[-<clientID>].<domain>`, or a
 * shared host (localhost, an IP literal, `sandbox.<domain>`) routed by `E2b-Sandbox-Id`/`-Port`.
 */
export function classify(authority: string, headers: Record<string, string | string[] | undefined>, domain: string): Destination {
  const host = hostName(authority);
  if (host === "") return { kind: "bad", message: "Invalid host" };
  if (host === `api.${domain}`) return { kind: "api" };
  if (host === domain) return { kind: "root" };
  if (host === "localhost" || isIP(host) !== 0 || host === `sandbox.${domain}`) {
    const id = first(headers["e2b-sandbox-id"]);
    const port = first(headers["e2b-sandbox-port"]);
    if (id === undefined) return { kind: "bad", message: "missing header E2b-Sandbox-Id" };
    if (port === undefined) return { kind: "bad", message: "missing header E2b-Sandbox-Port" };
    return route(port.trim(), id.trim().toLowerCase());
  }
  if (!host.endsWith(`.${domain}`)) return { kind: "unknown" };
  const label = host.slice(0, host.length - domain.length - 1);
  const parts = label.split("-");
  if (label.includes(".") || parts.length < 2) return { kind: "bad", message: "Invalid host" };
  return route(parts[0], parts[1]);
}

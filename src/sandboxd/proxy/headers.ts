import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import type { RouteTarget } from "./target.js";

/** Connection-level headers (RFC 9110 §7.6.1) that never cross a proxy, plus HTTP/2's forbidden ones. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "upgrade", "trailer", "proxy-authenticate", "proxy-authorization", "http2-settings", "host"]);

/** Headers of `headers` without pseudo-headers, hop-by-hop headers and those the Connection header names. */
export function endToEnd(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const named = new Set(
    String(headers["connection"] ?? "")
      .toLowerCase()
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  );
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || name.startsWith(":") || HOP_BY_HOP.has(name) || named.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** The Host the sandbox sees: the client's, or the sandbox's mask (`${PORT}` filled in) for non-envd ports. */
export function upstreamHost(clientHost: string, target: RouteTarget, port: number): string {
  if (port !== target.envdPort && target.maskRequestHost) return target.maskRequestHost.replaceAll("${PORT}", String(port));
  return clientHost;
}

/** The client's address without the IPv4-in-IPv6 prefix. */
export function clientAddress(remote: string | undefined): string {
  if (!remote) return "";
  return remote.startsWith("::ffff:") ? remote.slice(7) : remote;
}

/** Request headers for the sandbox: end-to-end headers plus X-Forwarded-For/-Proto/-Host. */
export function requestHeaders(headers: IncomingHttpHeaders, clientHost: string, remote: string | undefined): OutgoingHttpHeaders {
  const out = endToEnd(headers);
  const addr = clientAddress(remote);
  const prior = headers["x-forwarded-for"];
  out["x-forwarded-for"] = prior ? `${Array.isArray(prior) ? prior.join(", ") : prior}, ${addr}` : addr;
  out["x-forwarded-proto"] = "https";
  out["x-forwarded-host"] = clientHost;
  // gRPC needs "te: trailers" end to end; it is the only value HTTP/2 allows.
  if (String(headers["te"] ?? "").toLowerCase().includes("trailers")) out["te"] = "trailers";
  return out;
}

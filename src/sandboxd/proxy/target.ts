/**
 * What the proxy needs to know about a sandbox: the shape of the lifecycle's in-memory index
 * entries, written structurally so the proxy depends on the contract rather than on its module.
 */
export interface RouteTarget {
  sandboxID: string;
  state: "running" | "paused";
  /** IPv4 address of the sandbox on the host. */
  ip: string;
  /** envd's port (49983): requests to it skip the traffic-token check and get internal paths refused. */
  envdPort: number;
  /** When set, requests to every other port must carry it in `e2b-traffic-access-token`. */
  trafficAccessToken?: string;
  /** Paused, it is resumed by the first request for it (instead of a 502). */
  autoResume?: boolean;
  /** Host header sent to non-envd ports instead of the client's; `${PORT}` becomes the port. */
  maskRequestHost?: string;
  /** Ports that serve HTTPS themselves: the proxy speaks TLS to them (never to envd's port). */
  httpsPorts?: readonly number[];
}

/** The lookup the proxy reads on every request (memory only: no store on the request path). */
export interface RouteIndex {
  lookup(sandboxID: string): RouteTarget | undefined;
}

/** A request's destination as parsed from its host or its routing headers. */
export interface Route {
  sandboxID: string;
  port: number;
}

/**
 * The sandbox's `network.httpsPorts` as stored (the create body as sent): the valid port numbers
 * other than envd's, anything else ignored.
 */
export function httpsPortsOf(network: unknown, envdPort: number): number[] {
  const ports = (network as { httpsPorts?: unknown } | null | undefined)?.httpsPorts;
  if (!Array.isArray(ports)) return [];
  return [...new Set(ports.filter((p): p is number => Number.isInteger(p) && p >= 1 && p <= 65535 && p !== envdPort))];
}

import { readFileSync } from "node:fs";
import type { Logger } from "../log.js";
import { hostNameserver, startDnsForwarder } from "./dns-forwarder.js";
import { startEgressProxy } from "./egress-proxy.js";
import type { ServedPorts } from "./firewall.js";
import type { EgressPolicy } from "./policy.js";

/** What sandboxd serves to sandboxes for their egress: the resolver and the egress proxy. */
export interface EgressServices {
  served: ServedPorts;
  upstream: string;
  close(): void;
}

/**
 * Starts the resolver and the egress proxy when sandboxes have a way out; they answer only
 * addresses `policyOf` knows (live sandboxes). Undefined without an egress interface, or when
 * no upstream is given and the host's resolv.conf names none.
 */
export async function startEgressServices(p: { egressInterface: string | undefined; dnsUpstream: string | undefined; policyOf(ip: string): EgressPolicy | undefined; log: Logger }): Promise<EgressServices | undefined> {
  if (!p.egressInterface) return undefined;
  let upstream = p.dnsUpstream;
  if (!upstream) {
    try {
      upstream = hostNameserver(readFileSync("/etc/resolv.conf", "utf8"));
    } catch {
      upstream = undefined;
    }
  }
  if (!upstream) {
    p.log.warn("no DNS upstream (--dns-upstream, or a nameserver in /etc/resolv.conf): sandboxes get no resolver and domain rules allow nothing");
    return undefined;
  }
  const dns = await startDnsForwarder({ upstream, policyOf: p.policyOf });
  const proxy = await startEgressProxy({ upstream, policyOf: p.policyOf, log: p.log });
  p.log.info({ upstream, dnsPort: dns.port, httpPort: proxy.httpPort, tlsPort: proxy.tlsPort }, "sandbox resolver and egress proxy");
  return {
    served: { dnsPort: dns.port, httpPort: proxy.httpPort, tlsPort: proxy.tlsPort },
    upstream,
    close() {
      dns.close();
      proxy.close();
    },
  };
}

import { Resolver } from "node:dns/promises";
import { BlockList, connect, createServer, isIPv4, type Server, type Socket } from "node:net";
import { networkInterfaces } from "node:os";
import type { Logger } from "../log.js";
import { BLOCKED_RANGES } from "./firewall.js";
import { matchDomain, type EgressPolicy } from "./policy.js";
import { createHttpEgress } from "./http-egress.js";
import { peekHttpHost, peekSni, type Peek } from "./sni.js";

/** The most bytes read before the name must be known (a request head or a ClientHello). */
const MAX_PEEK = 16 * 1024;
/** How long a sandbox has to send them, and how long dialing may take. */
const PEEK_MS = 10_000;
const DIAL_MS = 10_000;

/** What the proxy needs from sandboxd: the policy of the sandbox at a source address, and where to look names up. */
export interface EgressProxyOptions {
  policyOf(ip: string): EgressPolicy | undefined;
  /** "ADDR" or "ADDR:PORT" of the DNS server names are resolved with. */
  upstream: string;
  log: Logger;
}

/** The two listeners: HTTP (decides by Host) and TLS (decides by SNI), on ephemeral ports of every address. */
export interface EgressProxy {
  httpPort: number;
  tlsPort: number;
  close(): void;
}

/**
 * Addresses a name may never resolve to for the proxy to dial: the private ranges, the host's own
 * addresses and the networks they are on (its LANs, the sandboxes' veths). Read at each use:
 * interfaces come and go.
 */
function deniedAddresses(): BlockList {
  const list = new BlockList();
  for (const r of BLOCKED_RANGES) {
    const [net, prefix] = r.split("/");
    list.addSubnet(net, Number(prefix), "ipv4");
  }
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) {
      if (a.family !== "IPv4") continue;
      list.addAddress(a.address, "ipv4");
      const [net, prefix] = (a.cidr ?? `${a.address}/32`).split("/");
      list.addSubnet(net, Number(prefix), "ipv4");
    }
  }
  return list;
}

/** A resolver bound to the upstream ("ADDR" or "ADDR:PORT", [v6]:PORT too). */
export function upstreamResolver(upstream: string): Resolver {
  const r = new Resolver({ timeout: 3000, tries: 2 });
  r.setServers([upstream]);
  return r;
}

/**
 * Sandboxd's egress proxy. Sandboxes' TCP connections to ports 80 and 443 that no CIDR rule
 * allowed arrive here (DNAT in the sandbox's netns). The proxy finds the sandbox by the source
 * address, reads the HTTP Host of every request (see http-egress.ts) or the TLS SNI, and when an
 * allowed domain matches it looks the name up itself and dials it (so what the sandbox resolved,
 * or put in /etc/hosts, changes nothing); a name resolving to a private or host address, or no
 * match, is refused. Inside TLS nothing more can be read: one connection is one SNI.
 */
export async function startEgressProxy(opts: EgressProxyOptions): Promise<EgressProxy> {
  const resolver = upstreamResolver(opts.upstream);
  const sockets = new Set<Socket>();

  const resolveName = async (name: string): Promise<string | undefined> => {
    const addrs = isIPv4(name) ? [name] : await resolver.resolve4(name).catch(() => [] as string[]);
    const denied = deniedAddresses();
    if (addrs.length === 0 || addrs.some((a) => denied.check(a, "ipv4"))) return undefined;
    return addrs[0];
  };

  /** Tracks a sandbox's connection and finds its policy by source address; undefined (and closed) when it has none. */
  const accept = (client: Socket): { src: string; policy: EgressPolicy } | undefined => {
    sockets.add(client);
    client.once("close", () => sockets.delete(client));
    client.on("error", () => client.destroy());
    const src = (client.remoteAddress ?? "").replace(/^::ffff:/, "");
    const policy = opts.policyOf(src);
    if (!policy) return void client.destroy();
    return { src, policy };
  };

  const handle = (client: Socket, port: number, peek: (b: Buffer) => Peek) => {
    const who = accept(client);
    if (!who) return;
    const { src, policy } = who;
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => client.destroy(), PEEK_MS);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const p = peek(buf);
      if (!p.done && buf.length < MAX_PEEK) return;
      client.off("data", onData);
      client.pause();
      clearTimeout(timer);
      const name = p.done ? p.name?.toLowerCase().replace(/\.$/, "") : undefined;
      if (!name || !policy.domains.some((d) => matchDomain(d, name))) {
        opts.log.debug({ src, name, port }, "egress proxy: no allowed domain matches; closed");
        return void client.destroy();
      }
      void resolveName(name).then((ip) => {
        if (!ip || client.destroyed) {
          opts.log.debug({ src, name, port }, "egress proxy: name does not resolve to an allowed address; closed");
          return void client.destroy();
        }
        // Both sides half-open: an end in one direction is passed on (pipe ends the other
        // socket's writable side) and the other direction keeps flowing; an error ends both.
        const upstream = connect({ host: ip, port, timeout: DIAL_MS, allowHalfOpen: true, noDelay: true });
        sockets.add(upstream);
        upstream.once("close", (hadError) => {
          sockets.delete(upstream);
          if (hadError) client.destroy();
        });
        upstream.once("connect", () => {
          upstream.setTimeout(0);
          upstream.write(buf);
          upstream.pipe(client);
          client.pipe(upstream);
        });
        upstream.once("timeout", () => upstream.destroy());
        upstream.on("error", () => client.destroy());
        client.once("close", () => upstream.destroy());
      });
    };
    client.on("data", onData);
  };

  const httpSide = createHttpEgress({ resolveName, log: opts.log });
  const takeHttp = (client: Socket) => {
    const who = accept(client);
    if (who) httpSide.take(client, who.src, who.policy);
  };

  const listen = async (port: number, peek: (b: Buffer) => Peek): Promise<[Server, number]> => {
    // a byte pipe: segments go on as they come (no Nagle delay on either side)
    const server = createServer({ allowHalfOpen: port !== 80, noDelay: true }, (c) => (port === 80 ? takeHttp(c) : handle(c, port, peek)));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "0.0.0.0", () => resolve());
    });
    return [server, (server.address() as { port: number }).port];
  };
  const [http, httpPort] = await listen(80, peekHttpHost);
  const [tls, tlsPort] = await listen(443, peekSni);
  return {
    httpPort,
    tlsPort,
    close() {
      http.close();
      httpSide.close();
      tls.close();
      for (const s of sockets) s.destroy();
    },
  };
}

import { createSocket, type Socket } from "node:dgram";
import { isIPv6 } from "node:net";

/** How long one query waits for the upstream's answer. */
const QUERY_MS = 5000;
/** The most queries in flight at once (each holds a socket). */
const MAX_INFLIGHT = 256;

/** "ADDR", "ADDR:PORT" or "[V6]:PORT" → host and port (53 by default); throws a message fit to show the user. */
export function parseUpstream(text: string): { host: string; port: number } {
  const m = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(text) ?? /^([^:]+)(?::(\d{1,5}))?$/.exec(text) ?? (isIPv6(text) ? [text, text, undefined] : null);
  const port = m?.[2] === undefined ? 53 : Number(m[2]);
  if (!m || !(port > 0 && port < 65536) || !/^[0-9a-fA-F.:]+$/.test(m[1])) throw new Error(`--dns-upstream must be ADDR[:PORT] (an IP address), got '${text}'`);
  return { host: m[1], port };
}

/** The first nameserver of the host's /etc/resolv.conf text, or undefined. */
export function hostNameserver(resolvConf: string): string | undefined {
  return /^\s*nameserver\s+(\S+)/m.exec(resolvConf)?.[1];
}

/** Sandboxd's resolver for sandboxes: a UDP forwarder on an ephemeral port of every address. */
export interface DnsForwarder {
  port: number;
  close(): void;
}

/**
 * Forwards each DNS query from a sandbox (a source `allowed` says is one) to the upstream on a
 * socket of its own and relays the answer back. Names are not filtered: which connections a name
 * leads to is the firewall's and the egress proxy's business.
 */
export async function startDnsForwarder(p: { upstream: string; allowed(ip: string): boolean }): Promise<DnsForwarder> {
  const up = parseUpstream(p.upstream);
  const server = createSocket("udp4");
  const inflight = new Set<Socket>();
  server.on("message", (msg, rinfo) => {
    if (!p.allowed(rinfo.address) || inflight.size >= MAX_INFLIGHT || msg.length < 12) return;
    const sock = createSocket(isIPv6(up.host) ? "udp6" : "udp4");
    inflight.add(sock);
    const done = () => {
      clearTimeout(timer);
      inflight.delete(sock);
      sock.close();
    };
    const timer = setTimeout(done, QUERY_MS);
    sock.on("error", done);
    sock.on("message", (answer) => {
      server.send(answer, rinfo.port, rinfo.address);
      done();
    });
    sock.send(msg, up.port, up.host);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.bind(0, "0.0.0.0", () => resolve());
  });
  return {
    port: server.address().port,
    close() {
      server.close();
      for (const s of [...inflight]) s.close();
    },
  };
}

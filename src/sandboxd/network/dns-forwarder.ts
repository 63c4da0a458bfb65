import { createSocket, type Socket } from "node:dgram";
import { isIPv6 } from "node:net";
import { matchDomain, type EgressPolicy } from "./policy.js";

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

/** Queries one sandbox may send a second once its burst is spent, and the burst. */
export const DNS_RATE_PER_S = 50;
export const DNS_BURST = 100;
/** Queries one sandbox may have waiting on the upstream at once. */
const INFLIGHT_PER_SOURCE = 32;

/** The name asked by a standard query with one question, lower-cased without the final dot; undefined for anything else. */
export function questionName(msg: Buffer): { name: string; end: number } | undefined {
  if (msg.length < 12 || (msg[2] & 0x80) !== 0 || ((msg[2] >> 3) & 0x0f) !== 0 || msg.readUInt16BE(4) !== 1) return undefined;
  const labels: string[] = [];
  let o = 12;
  for (;;) {
    if (o >= msg.length) return undefined;
    const len = msg[o];
    if (len === 0) break;
    // no compression in a question, and no label past 63 bytes
    if (len > 63 || o + 1 + len > msg.length) return undefined;
    labels.push(msg.subarray(o + 1, o + 1 + len).toString("latin1"));
    o += 1 + len;
  }
  const end = o + 5;
  if (end > msg.length || o - 12 > 255) return undefined;
  return { name: labels.join(".").toLowerCase(), end };
}

/** A REFUSED answer to `msg` (its ID, flags and question, no records). */
export function refused(msg: Buffer, questionEnd: number): Buffer {
  const out = Buffer.from(msg.subarray(0, questionEnd));
  out[2] = 0x80 | (msg[2] & 0x79); // QR, the opcode and RD as asked
  out[3] = 0x80 | 5; // RA, REFUSED
  out.writeUInt16BE(0, 6);
  out.writeUInt32BE(0, 8);
  return out;
}

/** A token bucket per source address: `take` says whether one more query fits its budget. */
class Budget {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  take(src: string, now = Date.now()): boolean {
    let b = this.buckets.get(src);
    if (!b) {
      if (this.buckets.size > 4096) for (const [k, v] of this.buckets) if (now - v.at > 60_000) this.buckets.delete(k);
      b = { tokens: DNS_BURST, at: now };
      this.buckets.set(src, b);
    }
    b.tokens = Math.min(DNS_BURST, b.tokens + ((now - b.at) / 1000) * DNS_RATE_PER_S);
    b.at = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }
}

/**
 * Forwards each DNS query from a sandbox (a source `policyOf` knows) to the upstream on a socket
 * of its own and relays the answer back. A sandbox whose policy allows domains gets answers only
 * for those names (REFUSED for the rest: its resolver is no tunnel to any name server out there);
 * every sandbox has a query budget (past it, queries are dropped) and a cap on queries in flight.
 * Malformed queries and anything but one standard question are dropped.
 */
export async function startDnsForwarder(p: { upstream: string; policyOf(ip: string): EgressPolicy | undefined }): Promise<DnsForwarder> {
  const up = parseUpstream(p.upstream);
  const server = createSocket("udp4");
  const inflight = new Set<Socket>();
  const perSource = new Map<string, number>();
  const budget = new Budget();
  server.on("message", (msg, rinfo) => {
    const policy = p.policyOf(rinfo.address);
    if (!policy || inflight.size >= MAX_INFLIGHT || (perSource.get(rinfo.address) ?? 0) >= INFLIGHT_PER_SOURCE) return;
    const q = questionName(msg);
    if (!q || !budget.take(rinfo.address)) return;
    if (policy.domains.length > 0 && !policy.domains.some((d) => matchDomain(d, q.name))) {
      server.send(refused(msg, q.end), rinfo.port, rinfo.address);
      return;
    }
    const sock = createSocket(isIPv6(up.host) ? "udp6" : "udp4");
    inflight.add(sock);
    perSource.set(rinfo.address, (perSource.get(rinfo.address) ?? 0) + 1);
    let finished = false;
    const done = () => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      inflight.delete(sock);
      const n = (perSource.get(rinfo.address) ?? 1) - 1;
      if (n > 0) perSource.set(rinfo.address, n);
      else perSource.delete(rinfo.address);
      try {
        sock.close();
      } catch {
        // closed with the forwarder
      }
    };
    const timer = setTimeout(done, QUERY_MS);
    sock.on("error", done);
    sock.on("message", (answer) => {
      server.send(answer, rinfo.port, rinfo.address);
      done();
    });
    // connected: only the upstream's datagrams are taken for the answer
    sock.connect(up.port, up.host, () => sock.send(msg));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.bind(0, "0.0.0.0", () => resolve());
  });
  return {
    port: server.address().port,
    close() {
      server.close();
      for (const s of [...inflight]) {
        try {
          s.close();
        } catch {
          // closed already
        }
      }
    },
  };
}

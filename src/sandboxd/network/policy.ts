import { isIPv4, isIPv6 } from "node:net";
import type { EgressPolicy } from "../host/sandbox-network.js";

/** What the sandbox's firewall enforces (the type lies on the floor, where the runtime sees it too). */
export type { EgressPolicy };

/** The SDK's `ALL_TRAFFIC`: the one unspecified address a deny list may name. */
export const ALL_TRAFFIC = "0.0.0.0/0";

/** A parsed address or network (a bare address has the full prefix). */
export interface IpNet {
  family: 4 | 6;
  address: string;
  prefix: number;
  /** Whether the entry was written as a CIDR ("a/n") rather than a bare address. */
  cidr: boolean;
}

/**
 * Parses "a.b.c.d", "a.b.c.d/n", an IPv6 address or "v6/n", as Go's net.ParseIP/ParseCIDR would;
 * undefined for anything else (in an allow list that makes it a domain).
 */
export function parseIpNet(text: string): IpNet | undefined {
  const slash = text.indexOf("/");
  const address = slash < 0 ? text : text.slice(0, slash);
  const family = isIPv4(address) ? 4 : isIPv6(address) ? 6 : 0;
  if (family === 0) return undefined;
  const max = family === 4 ? 32 : 128;
  if (slash < 0) return { family, address, prefix: max, cidr: false };
  const p = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(p) || Number(p) > max) return undefined;
  return { family, address, prefix: Number(p), cidr: true };
}

/** Whether the address part is the unspecified address (0.0.0.0 or ::). */
function unspecified(n: IpNet): boolean {
  if (n.family === 4) return n.address === "0.0.0.0";
  return n.address.replace(/[:0]/g, "") === "" && !n.address.includes(".");
}

/** An IPv4 address as a 32-bit number. */
function v4ToInt(a: string): number {
  return a.split(".").reduce((acc, o) => acc * 256 + Number(o), 0);
}

/** Dotted form of a 32-bit number. */
function intToV4(n: number): string {
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");
}

/** "a.b.c.d/n" with the host bits cleared (what nft's interval sets take); bare addresses become /32. */
export function v4Network(n: IpNet): string {
  const size = 2 ** (32 - n.prefix);
  const base = v4ToInt(n.address);
  return `${intToV4(base - (base % size))}/${n.prefix}`;
}

/** A deny entry is valid when it is an address or CIDR, not unspecified unless it is `0.0.0.0/0`. */
export function validDenyEntry(entry: string): boolean {
  const n = parseIpNet(entry);
  if (!n) return false;
  return entry === ALL_TRAFFIC || !unspecified(n);
}

/** What the API rejects in a pair of lists, as E2B's message; undefined when they are valid. */
export function egressRulesError(allowOut: string[] = [], denyOut: string[] = []): string | undefined {
  for (const entry of denyOut) if (!validDenyEntry(entry)) return `invalid denied CIDR ${entry}`;
  const hasDomain = allowOut.some((e) => parseIpNet(e) === undefined);
  if (hasDomain && !denyOut.includes(ALL_TRAFFIC)) {
    return "When specifying allowed domains in allow out, you must include 'ALL_TRAFFIC' in deny out to block all other traffic.";
  }
  return undefined;
}

/**
 * The enforced policy of a validated network config: allow entries split into IPv4 networks and
 * domains, deny entries into IPv4 networks; `allowInternetAccess: false` replaces the deny list by
 * everything. IPv6 entries are dropped here because the sandbox has no IPv6 route at all.
 */
export function egressPolicy(p: { allowOut?: string[]; denyOut?: string[]; allowInternetAccess?: boolean }): EgressPolicy {
  const v4 = (list: string[]) => [...new Set(list.map(parseIpNet).filter((n): n is IpNet => n?.family === 4).map(v4Network))];
  const deny = p.allowInternetAccess === false ? [ALL_TRAFFIC] : (p.denyOut ?? []);
  const allowOut = p.allowOut ?? [];
  return { allow: v4(allowOut), deny: v4(deny), domains: allowOut.filter((e) => parseIpNet(e) === undefined).map((d) => d.toLowerCase()) };
}

/** E2B's domain match: exact (case-insensitive), `*` for all, `*.x.y` for any subdomain of x.y (not x.y itself). */
export function matchDomain(pattern: string, host: string): boolean {
  const p = pattern.toLowerCase();
  const h = host.toLowerCase().replace(/\.$/, "");
  if (p === "*") return true;
  if (p.startsWith("*.")) return h.endsWith(p.slice(1));
  return p === h;
}

import { execTool } from "../host/exec.js";
import { RANGE_SET } from "./host-table.js";

/** An IPv4 network as its first and last address. */
interface Span {
  first: number;
  last: number;
  prefix: number;
}

/** "a.b.c.d/n" or "a.b.c.d" → its span; undefined for anything else. */
export function spanOf(text: string): Span | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/(\d{1,2}))?$/.exec(text.trim());
  if (!m) return undefined;
  const octets = m.slice(1, 5).map(Number);
  const prefix = m[5] === undefined ? 32 : Number(m[5]);
  if (octets.some((o) => o > 255) || prefix > 32) return undefined;
  const addr = octets.reduce((a, o) => a * 256 + o, 0);
  const size = 2 ** (32 - prefix);
  const first = addr - (addr % size);
  return { first, last: first + size - 1, prefix };
}

/** Whether two IPv4 networks share an address. */
export function overlaps(a: string, b: string): boolean {
  const x = spanOf(a);
  const y = spanOf(b);
  return !!x && !!y && x.first <= y.last && y.first <= x.last;
}

/** Runs nft and parses its JSON answer; undefined when nft refuses (no such table or set). */
async function nftJson(args: string[]): Promise<{ nftables?: Record<string, any>[] } | undefined> {
  const r = await execTool("nft", ["-j", ...args]);
  if (r.code !== 0) return undefined;
  try {
    return JSON.parse(r.stdout || "{}");
  } catch {
    return undefined;
  }
}

/** The elements of a set as nft -j prints them ("a.b.c.d", {prefix}, {range}) → "a.b.c.d/n" or "a-b" strings. */
function elementsOf(set: Record<string, any> | undefined): string[] {
  const out: string[] = [];
  for (const e of (set?.elem ?? []) as unknown[]) {
    if (typeof e === "string") out.push(e);
    else if (e && typeof e === "object" && "prefix" in e) out.push(`${(e as any).prefix.addr}/${(e as any).prefix.len}`);
  }
  return out;
}

/** The names of the interfaces in a sandboxd host table's `veths` set (none when it has no such table). */
export async function tableVeths(table: string): Promise<string[]> {
  const j = await nftJson(["list", "set", "inet", table, "veths"]);
  return elementsOf(j?.nftables?.find((o) => o.set)?.set);
}

/** The sandbox ranges of every other sandboxd host table on this machine: this version's (inet, a range set) and older ones (ip, read from their rules). */
async function otherTables(own: string): Promise<{ family: string; name: string; ranges: string[] }[]> {
  const j = await nftJson(["list", "tables"]);
  const out: { family: string; name: string; ranges: string[] }[] = [];
  for (const o of j?.nftables ?? []) {
    const t = o.table as { family: string; name: string } | undefined;
    if (!t || !/^sandboxd_/.test(t.name) || (t.family === "inet" && t.name === own)) continue;
    if (t.family === "inet") {
      const s = await nftJson(["list", "set", "inet", t.name, RANGE_SET]);
      out.push({ family: t.family, name: t.name, ranges: elementsOf(s?.nftables?.find((x) => x.set)?.set) });
    } else if (t.family === "ip") {
      const r = await execTool("nft", ["list", "table", "ip", t.name]);
      out.push({ family: t.family, name: t.name, ranges: [...new Set([...r.stdout.matchAll(/ip saddr (\d+\.\d+\.\d+\.\d+\/\d+) drop/g)].map((m) => m[1]))] });
    }
  }
  return out;
}

/**
 * Refuses (throws a message naming what is in the way) when this instance's sandbox range
 * overlaps another sandboxd's table, an address on this machine, or a route into part of it
 * (or a directly connected network around it), other than on this instance's own veths. Two
 * instances on one range would hand out the same addresses, and each one's host rules would
 * drop the other's traffic.
 */
export async function checkNetworkClaim(p: { table: string; cidr: string; ownVeths: Iterable<string> }): Promise<void> {
  const hint = "give this instance another --network-cidr";
  for (const t of await otherTables(p.table)) {
    const hit = t.ranges.find((r) => overlaps(r, p.cidr));
    if (hit) {
      throw new Error(
        `network range ${p.cidr} overlaps ${hit}, the range of another sandboxd instance (nft table ${t.family} ${t.name}): ${hint}, ` +
          `or, if that instance is gone for good, remove its table with 'nft delete table ${t.family} ${t.name}'`,
      );
    }
  }
  const own = new Set([...p.ownVeths, ...(await tableVeths(p.table))]);
  const mine = spanOf(p.cidr)!;
  const addrs = JSON.parse((await execTool("ip", ["-j", "-4", "addr"])).stdout || "[]") as { ifname: string; addr_info?: { local: string; prefixlen: number }[] }[];
  for (const link of addrs) {
    if (own.has(link.ifname)) continue;
    for (const a of link.addr_info ?? []) {
      if (overlaps(`${a.local}/32`, p.cidr)) throw new Error(`network range ${p.cidr} holds ${a.local}, an address of ${link.ifname} on this machine: ${hint}`);
    }
  }
  const routes = JSON.parse((await execTool("ip", ["-j", "-4", "route", "show", "table", "all"])).stdout || "[]") as { dst: string; dev?: string; scope?: string; type?: string; table?: string }[];
  for (const r of routes) {
    if (r.dst === "default" || (r.dev && own.has(r.dev)) || r.type === "broadcast") continue;
    const span = spanOf(r.dst);
    if (!span || !overlaps(r.dst, p.cidr)) continue;
    // a wider route through a gateway (a VPN's 0.0.0.0/1, say) is no claim on the range; a narrower one, or a LAN around it, is
    if (span.prefix >= mine.prefix || r.scope === "link") {
      throw new Error(`network range ${p.cidr} overlaps the route ${r.dst}${r.dev ? ` dev ${r.dev}` : ""} on this machine: ${hint}`);
    }
  }
}

/**
 * The IPv4 networks directly connected to this machine (its LANs), other than on `skip`
 * interfaces: sandboxes are kept from them as from the private ranges.
 */
export async function connectedNetworks(skip: Iterable<string>): Promise<string[]> {
  const s = new Set(skip);
  const routes = JSON.parse((await execTool("ip", ["-j", "-4", "route", "show", "table", "main", "scope", "link"])).stdout || "[]") as { dst: string; dev?: string }[];
  return routes.filter((r) => r.dst !== "default" && !(r.dev && s.has(r.dev)) && spanOf(r.dst)).map((r) => {
    const sp = spanOf(r.dst)!;
    return `${[24, 16, 8, 0].map((b) => Math.floor(sp.first / 2 ** b) % 256).join(".")}/${sp.prefix}`;
  });
}

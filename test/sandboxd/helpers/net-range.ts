// Test networks live in 198.18.0.0/15 (RFC 2544's benchmarking range), never in a range a
// default-configured sandboxd (10.12.0.0/16) or the machine itself uses; a test whose range is
// already in use on this machine stops at once, naming what holds it.
import { spawnSync } from "node:child_process";

/** An IPv4 network's first and last address. */
function span(cidr: string): [number, number] {
  const [a, p] = cidr.split("/");
  const n = a.split(".").reduce((x, o) => x * 256 + Number(o), 0);
  const size = 2 ** (32 - Number(p ?? 32));
  const first = n - (n % size);
  return [first, first + size - 1];
}

/** Whether two networks share an address. */
function overlap(a: string, b: string): boolean {
  const [x0, x1] = span(a);
  const [y0, y1] = span(b);
  return x0 <= y1 && y0 <= x1;
}

/** The sandbox ranges of the sandboxd host tables on this machine (other runs' live or leftover instances). */
function sandboxdRanges(): { table: string; cidr: string }[] {
  const out: { table: string; cidr: string }[] = [];
  const tables = JSON.parse(spawnSync("nft", ["-j", "list", "tables"], { encoding: "utf8" }).stdout || "{}") as { nftables?: { table?: { family: string; name: string } }[] };
  for (const o of tables.nftables ?? []) {
    if (o.table?.family !== "inet" || !/^sandboxd_/.test(o.table.name)) continue;
    const set = JSON.parse(spawnSync("nft", ["-j", "list", "set", "inet", o.table.name, "sandbox_range"], { encoding: "utf8" }).stdout || "{}") as { nftables?: { set?: { elem?: unknown[] } }[] };
    for (const e of set.nftables?.find((x) => x.set)?.set?.elem ?? []) {
      const p = (e as { prefix?: { addr: string; len: number } }).prefix;
      if (p) out.push({ table: o.table.name, cidr: `${p.addr}/${p.len}` });
      else if (typeof e === "string") out.push({ table: o.table.name, cidr: e });
    }
  }
  return out;
}

/** What on this machine holds part of `cidr` (an address, a route into it or around it on a link, or a sandboxd's host table), or undefined. */
export function rangeUser(cidr: string): string | undefined {
  for (const r of sandboxdRanges()) if (overlap(r.cidr, cidr)) return `range ${r.cidr} of nft table inet ${r.table}`;
  const addrs = JSON.parse(spawnSync("ip", ["-j", "-4", "addr"], { encoding: "utf8" }).stdout || "[]") as { ifname: string; addr_info?: { local: string }[] }[];
  for (const l of addrs) for (const a of l.addr_info ?? []) if (overlap(`${a.local}/32`, cidr)) return `address ${a.local} on ${l.ifname}`;
  const routes = JSON.parse(spawnSync("ip", ["-j", "-4", "route", "show", "table", "all"], { encoding: "utf8" }).stdout || "[]") as { dst: string; dev?: string; scope?: string }[];
  const prefix = Number(cidr.split("/")[1]);
  for (const r of routes) {
    if (r.dst === "default" || !/^\d+\.\d+\.\d+\.\d+(\/\d+)?$/.test(r.dst) || !overlap(r.dst, cidr)) continue;
    if (Number(r.dst.split("/")[1] ?? 32) >= prefix || r.scope === "link") return `route ${r.dst}${r.dev ? ` dev ${r.dev}` : ""}`;
  }
  return undefined;
}

/** Throws when `cidr` is outside 198.18.0.0/15 or anything on this machine already uses part of it. */
export function assertTestRange(cidr: string, what: string): void {
  if (!overlap(cidr, "198.18.0.0/15") || span(cidr)[0] < span("198.18.0.0/15")[0] || span(cidr)[1] > span("198.18.0.0/15")[1]) {
    throw new Error(`${what}: test networks live in 198.18.0.0/15, not ${cidr}`);
  }
  const user = rangeUser(cidr);
  if (user) throw new Error(`${what}: the test network ${cidr} is already in use on this machine (${user}); a leftover of an earlier run? remove it first`);
}

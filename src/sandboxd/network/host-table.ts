import { BLOCKED_RANGES, proxiesDomains, servesDns, type ServedPorts } from "./firewall.js";
import type { EgressPolicy } from "./policy.js";

/** Name of this instance's host nft table (family inet). */
export function hostTableName(instanceKey: string): string {
  return `sandboxd_${instanceKey}`;
}

/** The set that names the instance's sandbox range; other instances read it to refuse overlapping ranges. */
export const RANGE_SET = "sandbox_range";

/** What the base of the host table is made from (everything but the per-sandbox rules). */
export interface HostBase {
  table: string;
  /** The sandboxes' IPv4 range. */
  cidr: string;
  /** The interface sandboxes reach the outside through (forwarding and NAT); undefined: none. */
  iface?: string;
  /** sandboxd's resolver and egress proxy ports: only sandboxes may reach them. */
  served?: ServedPorts;
  /** IPv4 networks no sandbox reaches whatever its policy: private and special ranges, the host's LANs, the sandbox range itself. */
  blocked: string[];
}

/** An IPv4 interval set with its elements (none: no `elements` line, which nft refuses empty). */
function v4Set(name: string, elements: string[]): string {
  const els = elements.length > 0 ? `; elements = { ${elements.join(", ")} }` : "";
  return `  set ${name} { type ipv4_addr; flags interval; auto-merge${els}; }\n`;
}

/**
 * One nft transaction that makes the base of the host table or brings an existing one up to date
 * without touching the per-sandbox chains, so sandboxes left running by an earlier process stay
 * filtered across a restart. Packets from a sandbox's veth go to that veth's chains (the verdict
 * maps); anything else carrying a source in the range is dropped, as is anything forwarded into
 * a sandbox that is not a reply, and the served ports answer only sandboxes.
 */
export function hostBaseScript(p: HostBase): string {
  const t = `inet ${p.table}`;
  const served = p.served
    ? [`tcp dport { ${p.served.httpPort}, ${p.served.tlsPort} } drop`, `udp dport ${p.served.dnsPort} drop`]
    : [];
  const input = [
    "iifname vmap @from_veth_in",
    `ip saddr @${RANGE_SET} drop`,
    // sandboxd's resolver and egress proxy listen on every address: nothing but a sandbox's veth (decided above) reaches them
    ...served,
  ];
  const forward = [
    "iifname vmap @from_veth_fwd",
    `ip saddr @${RANGE_SET} drop`,
    "oifname @veths ct state established,related accept",
    "oifname @veths drop",
    `ip daddr @${RANGE_SET} drop`,
  ];
  const nat = p.iface ? [`ip saddr @${RANGE_SET} oifname ${JSON.stringify(p.iface)} masquerade`] : [];
  return [
    `table ${t} {`,
    `  set ${RANGE_SET} { type ipv4_addr; flags interval; }`,
    "  set veths { type ifname; }",
    "  map from_veth_fwd { type ifname : verdict; }",
    "  map from_veth_in { type ifname : verdict; }",
    "  set blocked { type ipv4_addr; flags interval; auto-merge; }",
    "  chain input { type filter hook input priority filter; policy accept; }",
    "  chain forward { type filter hook forward priority filter; policy accept; }",
    "  chain postrouting { type nat hook postrouting priority srcnat; policy accept; }",
    "}",
    `flush set ${t} ${RANGE_SET}`,
    `add element ${t} ${RANGE_SET} { ${p.cidr} }`,
    `flush set ${t} blocked`,
    `add element ${t} blocked { ${[...new Set([...p.blocked, p.cidr])].join(", ")} }`,
    ...(["input", "forward", "postrouting"] as const).flatMap((c) => [
      `flush chain ${t} ${c}`,
      ...(c === "input" ? input : c === "forward" ? forward : nat).map((r) => `add rule ${t} ${c} ${r}`),
    ]),
    "",
  ].join("\n");
}

/** What one sandbox's host rules are made from. */
export interface VethRules {
  table: string;
  /** The host end of the sandbox's veth pair. */
  veth: string;
  /** The sandbox's address (the only source its veth may carry) and the host end's. */
  ip: string;
  hostIp: string;
  /** The egress interface; undefined: nothing is forwarded for the sandbox. */
  iface?: string;
  policy?: EgressPolicy;
  served?: ServedPorts;
}

/** The names of one veth's chains and sets. */
function names(veth: string) {
  return { fwd: `f_${veth}`, inp: `i_${veth}`, allow: `a_${veth}`, deny: `d_${veth}` };
}

/**
 * One nft transaction that installs or replaces one sandbox's host rules: its forward chain
 * (only its own source address; no IPv6; never the blocked ranges; out of the egress interface
 * only; its allow set before its deny set, as inside the sandbox) and its input chain (only the
 * ports sandboxd serves it, on its own host end). The chains are flushed and refilled and the
 * sets emptied and refilled in the same transaction, so no packet sees a half-made policy.
 * Interface names match by name: rules installed before the link exists apply from its first packet.
 */
export function vethScript(v: VethRules): string {
  const t = `inet ${v.table}`;
  const n = names(v.veth);
  const q = JSON.stringify(v.veth);
  const fw = { hostIp: v.hostIp, egress: !!v.iface, policy: v.policy, served: v.served };
  const fwd = [
    "meta nfproto != ipv4 drop",
    `ip saddr != ${v.ip} drop`,
    "ct state established,related accept",
    "ip daddr @blocked drop",
    ...(v.iface ? [`oifname != ${JSON.stringify(v.iface)} drop`, `ip daddr @${n.allow} accept`, `ip daddr @${n.deny} drop`, "accept"] : ["drop"]),
  ];
  const inp = [
    "meta nfproto != ipv4 drop",
    `ip saddr != ${v.ip} drop`,
    "ct state established,related accept",
    `ip daddr != ${v.hostIp} drop`,
    ...(proxiesDomains(fw) ? [`tcp dport { ${v.served!.httpPort}, ${v.served!.tlsPort} } accept`] : []),
    ...(servesDns(fw) ? [`udp dport ${v.served!.dnsPort} accept`] : []),
    "drop",
  ];
  const allow = v.policy?.allow ?? [];
  const deny = v.policy?.deny ?? [];
  return [
    `add chain ${t} ${n.fwd}`,
    `add chain ${t} ${n.inp}`,
    `add set ${t} ${n.allow} { type ipv4_addr; flags interval; auto-merge; }`,
    `add set ${t} ${n.deny} { type ipv4_addr; flags interval; auto-merge; }`,
    `flush chain ${t} ${n.fwd}`,
    `flush chain ${t} ${n.inp}`,
    `flush set ${t} ${n.allow}`,
    `flush set ${t} ${n.deny}`,
    ...(allow.length > 0 ? [`add element ${t} ${n.allow} { ${allow.join(", ")} }`] : []),
    ...(deny.length > 0 ? [`add element ${t} ${n.deny} { ${deny.join(", ")} }`] : []),
    ...fwd.map((r) => `add rule ${t} ${n.fwd} ${r}`),
    ...inp.map((r) => `add rule ${t} ${n.inp} ${r}`),
    `add element ${t} from_veth_fwd { ${q} : jump ${n.fwd} }`,
    `add element ${t} from_veth_in { ${q} : jump ${n.inp} }`,
    `add element ${t} veths { ${q} }`,
    "",
  ].join("\n");
}

/** One nft transaction that removes a veth's rules, whether or not they exist (each part is made first, then deleted). */
export function vethRemoveScript(table: string, veth: string): string {
  const t = `inet ${table}`;
  const n = names(veth);
  const q = JSON.stringify(veth);
  return [
    `add chain ${t} ${n.fwd}`,
    `add chain ${t} ${n.inp}`,
    `add set ${t} ${n.allow} { type ipv4_addr; flags interval; auto-merge; }`,
    `add set ${t} ${n.deny} { type ipv4_addr; flags interval; auto-merge; }`,
    `add element ${t} from_veth_fwd { ${q} : jump ${n.fwd} }`,
    `add element ${t} from_veth_in { ${q} : jump ${n.inp} }`,
    `add element ${t} veths { ${q} }`,
    `delete element ${t} from_veth_fwd { ${q} }`,
    `delete element ${t} from_veth_in { ${q} }`,
    `delete element ${t} veths { ${q} }`,
    `delete chain ${t} ${n.fwd}`,
    `delete chain ${t} ${n.inp}`,
    `delete set ${t} ${n.allow}`,
    `delete set ${t} ${n.deny}`,
    "",
  ].join("\n");
}

/** The ranges every sandbox is kept from, before the host's own networks are added. */
export const ALWAYS_BLOCKED: readonly string[] = BLOCKED_RANGES;

import type { EgressPolicy } from "./policy.js";

/** Destinations a sandbox never opens connections to: private, shared, link-local, loopback, special. */
export const BLOCKED_RANGES = [
  "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
  "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4",
];

/** Name of the nft table inside each sandbox's netns. */
export const SANDBOX_TABLE = "sandboxd";

/** An IPv4 interval set, with its elements when there are any (nft rejects an empty `elements`). */
function v4Set(name: string, elements: string[]): string {
  const els = elements.length > 0 ? `\n    elements = { ${elements.join(", ")} }` : "";
  return `  set ${name} {\n    type ipv4_addr\n    flags interval\n    auto-merge${els}\n  }\n`;
}

/** A port set, with its elements when there are any. */
function portSet(name: string, ports: number[]): string {
  const els = ports.length > 0 ? `\n    elements = { ${ports.join(", ")} }` : "";
  return `  set ${name} {\n    type inet_service${els}\n  }\n`;
}

/** What the sandbox's table is made from. */
export interface SandboxFirewall {
  hostIp: string;
  /** Whether sandbox traffic may leave the host at all (an egress interface is configured). */
  egress: boolean;
  /** The user's rules; none: everything public is allowed. */
  policy?: EgressPolicy;
  /** What sandboxd serves to sandboxes on the host end (none: nothing). */
  served?: ServedPorts;
}

/** sandboxd's resolver and egress proxy ports (on every host address, the host end included). */
export interface ServedPorts {
  dnsPort: number;
  httpPort: number;
  tlsPort: number;
}

/** Whether the sandbox gets sandboxd's resolver: unless everything is denied and no domain is allowed (E2B adds no resolver then either). */
export function servesDns(p: SandboxFirewall): boolean {
  if (!p.egress || !p.served) return false;
  return !p.policy || p.policy.domains.length > 0 || !p.policy.deny.includes("0.0.0.0/0");
}

/** Whether TCP to 80 and 443 that no CIDR allows goes to the egress proxy: when domains are allowed. */
export function proxiesDomains(p: SandboxFirewall): boolean {
  return !!(p.egress && p.served && p.policy && p.policy.domains.length > 0);
}

/**
 * The nat chain: DNS (UDP 53, whatever the server) to sandboxd's resolver; with allowed domains,
 * TCP 80 and 443 that no allow CIDR covers to the egress proxy (which decides by Host / SNI).
 */
function natChain(p: SandboxFirewall): string {
  const dns = servesDns(p);
  const proxy = proxiesDomains(p);
  if (!p.served || (!dns && !proxy)) return "";
  const h = p.hostIp;
  const lines = [
    // the sandbox's own loopback servers (a local resolver, say) stay its own
    `ip daddr 127.0.0.0/8 return`,
    ...(dns ? [`udp dport 53 dnat ip to ${h}:${p.served.dnsPort}`] : []),
    ...(proxy
      ? [
          `ip daddr @allow return`,
          `ip daddr { ${h}, ${BLOCKED_RANGES.join(", ")} } return`,
          `tcp dport 80 dnat ip to ${h}:${p.served.httpPort}`,
          `tcp dport 443 dnat ip to ${h}:${p.served.tlsPort}`,
        ]
      : []),
  ];
  return `  chain nat_output {
    type nat hook output priority -100; policy accept;
${lines.map((l) => `    ${l}
`).join("")}  }
`;
}

/**
 * The nft ruleset installed (from the host) inside a sandbox's network namespace. Sandbox root
 * lacks CAP_NET_ADMIN, so it cannot change it. New inbound connections are accepted only from
 * the host end (the proxy dials the sandbox). New outbound ones, in this order: to the host end
 * only on the ports sandboxd serves there (its resolver, its egress proxy, reached through the
 * nat chain); never to private ranges or IPv6; without an egress
 * interface nowhere else; then the user's allow set (so allow beats deny), the deny set, and
 * everything else accepted. Established flows pass first, so a replacement changes only new ones.
 */
export function sandboxRuleset(p: SandboxFirewall): string {
  return `table inet ${SANDBOX_TABLE} {
${portSet("host_tcp", proxiesDomains(p) ? [p.served!.httpPort, p.served!.tlsPort] : [])}${portSet("host_udp", servesDns(p) ? [p.served!.dnsPort] : [])}${v4Set("allow", p.policy?.allow ?? [])}${v4Set("deny", p.policy?.deny ?? [])}  chain input {
    type filter hook input priority filter; policy drop;
    ct state established,related accept
    iifname "lo" accept
    ip saddr ${p.hostIp} accept
  }
  chain output {
    type filter hook output priority filter; policy accept;
    ct state established,related accept
    oifname "lo" accept
    ip daddr ${p.hostIp} tcp dport @host_tcp accept
    ip daddr ${p.hostIp} udp dport @host_udp accept
    ip daddr ${p.hostIp} drop
    ip daddr { ${BLOCKED_RANGES.join(", ")} } drop
    meta nfproto ipv6 drop
${p.egress ? "" : "    drop\n"}    ip daddr @allow accept
    ip daddr @deny drop
  }
${natChain(p)}}
`;
}

/**
 * One nft transaction that installs the table or replaces it whole: make sure it exists, delete
 * it, define it again. nft applies the lot or nothing, so no packet ever sees a half-made table.
 */
export function replaceSandboxTable(p: SandboxFirewall): string {
  return `table inet ${SANDBOX_TABLE}\ndelete table inet ${SANDBOX_TABLE}\n${sandboxRuleset(p)}`;
}

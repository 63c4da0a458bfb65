/** Destinations a sandbox never opens connections to: private, shared, link-local, loopback, special. */
export const BLOCKED_RANGES = [
  "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
  "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4",
];

/** Name of the nft table inside each sandbox's netns. */
export const SANDBOX_TABLE = "sandboxd";

/**
 * The nft ruleset installed (from the host) inside a sandbox's network namespace. Sandbox root
 * lacks CAP_NET_ADMIN, so it cannot change it. New inbound connections are accepted only from
 * the host end (the proxy dials the sandbox); new outbound ones to the host end only to the
 * ports in set `host_tcp` (what sandboxd serves to sandboxes); never to private ranges or IPv6;
 * and, without an egress interface, to nowhere at all.
 */
export function sandboxRuleset(p: { hostIp: string; egress: boolean }): string {
  return `table inet ${SANDBOX_TABLE} {
  set host_tcp {
    type inet_service
  }
  chain input {
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
    ip daddr ${p.hostIp} drop
    ip daddr { ${BLOCKED_RANGES.join(", ")} } drop
    meta nfproto ipv6 drop
${p.egress ? "" : "    drop\n"}  }
}
`;
}

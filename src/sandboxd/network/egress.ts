import { writeFileSync } from "node:fs";
import { execTool, mustExec } from "../runtime/exec.js";
import type { ServedPorts } from "./firewall.js";

/** Name of this instance's host nft table (only made when an egress interface is configured). */
export function egressTableName(instanceKey: string): string {
  return `sandboxd_${instanceKey}`;
}

/**
 * The host nft table that lets sandboxes out through one interface: new connections from the
 * sandbox network are forwarded and masqueraded out of `iface` only, replies come back, and
 * nothing from the sandbox network reaches the host itself (its other addresses included) but
 * sandboxd's resolver and egress proxy ports.
 * The sandboxes' own tables still drop private destinations.
 */
export function egressRuleset(p: { table: string; cidr: string; iface: string; served?: ServedPorts }): string {
  const q = JSON.stringify(p.iface);
  // sandboxd's resolver and egress proxy listen on every address: only sandboxes may reach them.
  const served = p.served
    ? [
        `    tcp dport { ${p.served.httpPort}, ${p.served.tlsPort} } ip saddr != ${p.cidr} drop`,
        `    udp dport ${p.served.dnsPort} ip saddr != ${p.cidr} drop`,
        `    ip saddr ${p.cidr} tcp dport { ${p.served.httpPort}, ${p.served.tlsPort} } accept`,
        `    ip saddr ${p.cidr} udp dport ${p.served.dnsPort} accept`,
        "",
      ].join("\n")
    : "";
  return `table ip ${p.table} {
  chain input {
    type filter hook input priority filter; policy accept;
    ip saddr ${p.cidr} ct state established,related accept
${served}    ip saddr ${p.cidr} drop
  }
  chain forward {
    type filter hook forward priority filter; policy accept;
    ip saddr ${p.cidr} oifname ${q} accept
    ip daddr ${p.cidr} iifname ${q} ct state established,related accept
    ip saddr ${p.cidr} drop
    ip daddr ${p.cidr} drop
  }
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr ${p.cidr} oifname ${q} masquerade
  }
}
`;
}

/**
 * Installs (atomically replacing) the egress table and turns on IPv4 forwarding, which NAT needs.
 * Only called when an egress interface is configured: tests never do.
 */
export async function installEgress(p: { table: string; cidr: string; iface: string; served?: ServedPorts }): Promise<void> {
  if (!/^[A-Za-z0-9_.:-]{1,15}$/.test(p.iface)) throw new Error(`egress interface ${JSON.stringify(p.iface)} is not an interface name`);
  await mustExec("nft", ["-f", "-"], { input: `table ip ${p.table}\ndelete table ip ${p.table}\n${egressRuleset(p)}` });
  writeFileSync("/proc/sys/net/ipv4/ip_forward", "1\n");
}

/** The interface of the host's IPv4 default route, or undefined when it has none. */
export async function defaultRouteInterface(): Promise<string | undefined> {
  const r = await execTool("ip", ["-j", "-4", "route", "show", "default"]);
  if (r.code !== 0) return undefined;
  try {
    const routes = JSON.parse(r.stdout || "[]") as { dev?: string }[];
    return routes.find((x) => x.dev)?.dev;
  } catch {
    return undefined;
  }
}

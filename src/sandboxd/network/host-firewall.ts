import { existsSync, writeFileSync } from "node:fs";
import type { Logger } from "../log.js";
import { execTool, mustExec } from "../host/exec.js";
import { checkNetworkClaim, connectedNetworks, tableVeths } from "./claims.js";
import type { ServedPorts } from "./firewall.js";
import { ALWAYS_BLOCKED, hostBaseScript, vethRemoveScript, vethScript } from "./host-table.js";
import type { EgressPolicy } from "./policy.js";

/** Options of an instance's host firewall. */
export interface HostFirewallOptions {
  table: string;
  cidr: string;
  /** The egress interface; undefined: nothing from a sandbox is forwarded anywhere. */
  iface?: string;
  served?: ServedPorts;
  log: Logger;
}

/** One sandbox's host rules. */
export interface VethPolicy {
  veth: string;
  ip: string;
  hostIp: string;
  policy?: EgressPolicy;
}

/**
 * sandboxd's nft table on the host (family inet): kept while the instance runs or has sandboxes,
 * with a chain pair per sandbox veth that repeats the sandbox's own policy outside its reach.
 * The rules inside a sandbox's netns are the first wall; these hold even when a sandbox gets
 * around those (raw frames, IPv6, spoofed sources).
 */
export class HostFirewall {
  private started?: Promise<void>;

  constructor(private readonly o: HostFirewallOptions) {}

  /**
   * Checks that no other instance claims the range, then installs (or brings up to date) the
   * base table and drops the rules of veths that are neither `ownVeths` nor present on the host.
   * Runs once; later calls wait for the first.
   */
  start(ownVeths: () => Iterable<string>): Promise<void> {
    this.started ??= this.doStart([...ownVeths()]).catch((err: unknown) => {
      this.started = undefined;
      throw err;
    });
    return this.started;
  }

  private async doStart(ownVeths: string[]): Promise<void> {
    const { table, cidr, iface, served } = this.o;
    await checkNetworkClaim({ table, cidr, ownVeths });
    if (iface !== undefined && !/^[A-Za-z0-9_.:-]{1,15}$/.test(iface)) throw new Error(`egress interface ${JSON.stringify(iface)} is not an interface name`);
    const present = new Set([...ownVeths, ...(await tableVeths(table))]);
    const lans = await connectedNetworks(present);
    // the table of an older sandboxd on this data dir (family ip, made only with an egress interface)
    await execTool("nft", ["delete", "table", "ip", table]);
    await mustExec("nft", ["-f", "-"], { input: hostBaseScript({ table, cidr, iface, served, blocked: [...ALWAYS_BLOCKED, ...lans] }) });
    const keep = new Set(ownVeths);
    for (const v of await tableVeths(table)) {
      if (!keep.has(v) && !existsSync(`/sys/class/net/${v}`)) await this.removeVeth(v);
    }
    // forwarding is turned on only for a way out; without one the host's setting is left as it is
    if (iface) writeFileSync("/proc/sys/net/ipv4/ip_forward", "1\n");
    this.o.log.info({ table, cidr, egressInterface: iface ?? "none", blockedLans: lans.length }, "host firewall ready");
  }

  /** Installs or atomically replaces one sandbox's host rules. */
  async setVeth(v: VethPolicy, nice?: number): Promise<void> {
    await mustExec("nft", ["-f", "-"], { input: vethScript({ table: this.o.table, iface: this.o.iface, served: this.o.served, ...v }), nice });
  }

  /** Removes one sandbox's host rules (none there, or no table: nothing to do). */
  async removeVeth(veth: string): Promise<void> {
    const r = await execTool("nft", ["-f", "-"], { input: vethRemoveScript(this.o.table, veth) });
    if (r.code === 0) return;
    if ((await execTool("nft", ["list", "table", "inet", this.o.table])).code !== 0) return;
    throw new Error(`removing the host rules of ${veth} failed: ${r.stderr.trim()}`);
  }

  /** Deletes the table when no sandbox needs it (`sandboxes` is 0): what a stopped sandboxd leaves is only what its live sandboxes need. */
  async release(sandboxes: number): Promise<void> {
    if (sandboxes > 0) return;
    this.started = undefined;
    const r = await execTool("nft", ["delete", "table", "inet", this.o.table]);
    if (r.code !== 0 && !/No such file or directory/.test(r.stderr)) throw new Error(`deleting nft table ${this.o.table} failed: ${r.stderr.trim()}`);
  }
}

/**
 * Turns IPv6 off on an interface before it comes up: no link-local address, and the kernel drops
 * IPv6 arriving on it, so no host service on `::` is reachable through it. A host without IPv6
 * has nothing to turn off.
 */
export function disableIpv6(iface: string): void {
  const file = `/proc/sys/net/ipv6/conf/${iface}/disable_ipv6`;
  if (!existsSync("/proc/sys/net/ipv6")) return;
  writeFileSync(file, "1\n");
}

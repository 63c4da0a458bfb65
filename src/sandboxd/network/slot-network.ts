/**
 * The sandbox network of the runc runtime: one /30 per sandbox from the instance's range, a veth
 * pair into the sandbox's network namespace, the sandbox's own nft table and its chains in the
 * instance's host table. It implements the contract the runtime is given (host/sandbox-network.ts).
 */
import { join, resolve } from "node:path";
import type { Logger } from "../log.js";
import { instanceKey } from "../host/instance.js";
import type { EgressPolicy, NetworkLease, SandboxNetwork } from "../host/sandbox-network.js";
import type { ServedPorts } from "./firewall.js";
import { HostFirewall } from "./host-firewall.js";
import { hostTableName } from "./host-table.js";
import { Ipam, type Slot } from "./ipam.js";
import { attachSlot, detachSlot, hostVethName, replaceFirewall } from "./veth.js";

/** Options of one instance's sandbox network. */
export interface SlotNetworkOptions {
  /** sandboxd's data directory: the slots are kept under runtime/slots there, and its key names the veths and the nft table. */
  dataDir: string;
  /** IPv4 network the sandboxes' /30s come from, e.g. 10.12.0.0/16. */
  networkCidr: string;
  /** Interface sandboxes reach the outside through (NAT); undefined: no forwarding, no NAT. */
  egressInterface?: string;
  /** sandboxd's resolver and egress proxy, which sandboxes reach on their host end. */
  served?: ServedPorts;
  log: Logger;
}

/** The /30-per-sandbox network of one sandboxd instance. */
export function createSlotNetwork(opts: SlotNetworkOptions): SandboxNetwork {
  return new SlotNetwork(opts);
}

class SlotNetwork implements SandboxNetwork {
  private readonly key: string;
  private readonly ipam: Ipam;
  private readonly host: HostFirewall;
  private readonly egress: boolean;

  constructor(private readonly opts: SlotNetworkOptions) {
    this.key = instanceKey(opts.dataDir);
    this.ipam = new Ipam(join(resolve(opts.dataDir), "runtime", "slots"), opts.networkCidr);
    this.host = new HostFirewall({ table: hostTableName(this.key), cidr: opts.networkCidr, iface: opts.egressInterface, served: opts.served, log: opts.log });
    this.egress = !!opts.egressInterface;
  }

  start(sandboxIDs: () => string[]): Promise<void> {
    return this.host.start(() => sandboxIDs().map((id) => hostVethName(this.key, id)));
  }

  close(sandboxesLeft: number): Promise<void> {
    return this.host.release(sandboxesLeft);
  }

  claim(sandboxID: string): NetworkLease {
    const slot = this.ipam.claim(sandboxID);
    return { ip: slot.ip, hostIp: slot.hostIp, hostVeth: hostVethName(this.key, sandboxID), slot: slot.index };
  }

  attach(lease: NetworkLease, pid: number, o: { policy?: EgressPolicy; nice?: number }): Promise<void> {
    const slot: Slot = { index: lease.slot, ip: lease.ip, hostIp: lease.hostIp, prefixLength: 30 };
    return attachSlot({ pid, hostVeth: lease.hostVeth, slot, egress: this.egress, policy: o.policy, served: this.opts.served, nice: o.nice, host: this.host });
  }

  async setPolicy(lease: NetworkLease, pid: number, policy: EgressPolicy): Promise<void> {
    // two transactions (two namespaces): while one is applied and the other not, what passes is what both allow
    await Promise.all([
      replaceFirewall({ pid, hostIp: lease.hostIp, egress: this.egress, policy, served: this.opts.served }),
      this.host.setVeth({ veth: lease.hostVeth, ip: lease.ip, hostIp: lease.hostIp, policy }),
    ]);
  }

  async detach(sandboxID: string): Promise<void> {
    const veth = hostVethName(this.key, sandboxID);
    await detachSlot(veth);
    await this.host.removeVeth(veth);
  }

  release(sandboxID: string): void {
    this.ipam.release(sandboxID);
  }

  claimed(): string[] {
    return [...this.ipam.taken().values()];
  }
}

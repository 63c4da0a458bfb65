/**
 * The sandbox network of the runc runtime: one /30 per sandbox from the instance's range, a veth
 * pair into the sandbox's network namespace, the sandbox's own nft table and its chains in the
 * instance's host table, and a few such slots wired ahead (spare-slots.ts). It implements the
 * contract the runtime is given (host/sandbox-network.ts).
 */
import { join, resolve } from "node:path";
import type { Logger } from "../log.js";
import { instanceKey } from "../host/instance.js";
import type { EgressPolicy, NetworkLease, PreparedSlot, SandboxNetwork } from "../host/sandbox-network.js";
import type { ServedPorts } from "./firewall.js";
import { HostFirewall } from "./host-firewall.js";
import { hostTableName } from "./host-table.js";
import { Ipam, type Slot } from "./ipam.js";
import { SpareSlots } from "./spare-slots.js";
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
  /** Slots kept wired ahead for cold starts (default 0: none). */
  spares?: number;
  log: Logger;
}

/** The niceness spare slots are wired at: work ahead of need yields to live work. */
const SPARE_NICE = 10;

/** The /30-per-sandbox network of one sandboxd instance. */
export function createSlotNetwork(opts: SlotNetworkOptions): SandboxNetwork {
  return new SlotNetwork(opts);
}

class SlotNetwork implements SandboxNetwork {
  private readonly key: string;
  private readonly ipam: Ipam;
  private readonly host: HostFirewall;
  private readonly egress: boolean;
  private readonly spares: SpareSlots;

  constructor(private readonly opts: SlotNetworkOptions) {
    this.key = instanceKey(opts.dataDir);
    const runtimeDir = join(resolve(opts.dataDir), "runtime");
    this.ipam = new Ipam(join(runtimeDir, "slots"), opts.networkCidr);
    this.host = new HostFirewall({ table: hostTableName(this.key), cidr: opts.networkCidr, iface: opts.egressInterface, served: opts.served, log: opts.log });
    this.egress = !!opts.egressInterface;
    this.spares = new SpareSlots(runtimeDir, opts.spares ?? 0, {
      claim: (id, veth) => this.ipam.claim(id, veth),
      vethName: (id) => hostVethName(this.key, id),
      attach: (slot, veth, pid) => attachSlot({ pid, hostVeth: veth, slot, egress: this.egress, served: this.opts.served, nice: SPARE_NICE, host: this.host }),
      reassign: (index, from, to) => void this.ipam.reassign(index, from, to),
      setPolicy: (lease, pid, policy) => this.setPolicy(lease, pid, policy),
      discard: async (id) => {
        await this.detach(id);
        this.release(id);
      },
    }, opts.log, SPARE_NICE);
  }

  async start(sandboxIDs: () => string[]): Promise<void> {
    await this.host.start(() => sandboxIDs().map((id) => this.vethOf(id)));
    this.spares.open();
  }

  async close(sandboxesLeft: number): Promise<void> {
    await this.spares.close();
    await this.host.release(sandboxesLeft);
  }

  takePrepared(sandboxID: string, policy?: EgressPolicy): Promise<PreparedSlot | undefined> {
    return this.spares.take(sandboxID, policy);
  }

  claim(sandboxID: string): NetworkLease {
    const slot = this.ipam.claim(sandboxID);
    return { ip: slot.ip, hostIp: slot.hostIp, hostVeth: hostVethName(this.key, sandboxID), slot: slot.index };
  }

  /** The host end's name of `sandboxID`: the one its slot records (a slot wired ahead), else the one its ID gives. */
  private vethOf(sandboxID: string): string {
    return this.ipam.vethOf(sandboxID) ?? hostVethName(this.key, sandboxID);
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
    const veth = this.vethOf(sandboxID);
    await detachSlot(veth);
    await this.host.removeVeth(veth);
  }

  release(sandboxID: string): void {
    this.ipam.release(sandboxID);
  }

  claimed(): string[] {
    this.spares.sweep();
    const held = this.spares.held();
    return [...this.ipam.taken().values()].filter((id) => !held.has(id));
  }
}

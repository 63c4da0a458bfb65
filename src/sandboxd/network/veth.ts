import { createHash } from "node:crypto";
import { execTool, mustExec } from "../host/exec.js";
import { replaceSandboxTable, sandboxRuleset, type ServedPorts } from "./firewall.js";
import { disableIpv6, type HostFirewall } from "./host-firewall.js";
import type { Slot } from "./ipam.js";
import type { EgressPolicy } from "./policy.js";

/**
 * The host end's name for a sandbox: "sb" + 13 hex of a hash of the runtime instance and the
 * sandbox ID (interface names are at most 15 bytes), so that two sandboxd instances on one host
 * never pick the same name and a restarted one finds it again.
 */
export function hostVethName(instanceKey: string, sandboxID: string): string {
  return "sb" + createHash("sha256").update(`${instanceKey}\0${sandboxID}`).digest("hex").slice(0, 13);
}

/**
 * Wires a slot into the network namespace of process `pid` (the sandbox's init, made by runc
 * inside the sandbox's user namespace): a veth pair with the peer created directly in there as
 * eth0, addresses and a default route via the host end, the sandbox's firewall, and (with `host`)
 * its rules in sandboxd's host table.
 */
export async function attachSlot(p: { pid: number; hostVeth: string; slot: Slot; egress: boolean; policy?: EgressPolicy; served?: ServedPorts; nice?: number; host?: HostFirewall }): Promise<void> {
  const { pid, hostVeth, slot } = p;
  const inNetns = (cmd: string[], input: string) => mustExec("nsenter", ["-t", String(pid), "-n", ...cmd], { input, nice: p.nice });
  // Both firewalls go in while the host makes the pair (they touch different namespaces or match
  // the host end by name), and before either end comes up: no packet passes unfiltered.
  // Each end knows the other's address from the start (fixed MACs, permanent neighbour entries):
  // an ARP request sent while a new pair is still coming up can be lost, and the next one goes
  // a second later (the neighbour retransmit time), with the first connection to envd waiting on it.
  const hostMac = macOf(slot.hostIp);
  const sandboxMac = macOf(slot.ip);
  const hostRules = p.host ? p.host.setVeth({ veth: hostVeth, ip: slot.ip, hostIp: slot.hostIp, policy: p.policy }, p.nice) : Promise.resolve();
  const hostEnd = (async () => {
    await mustExec("ip", ["link", "add", hostVeth, "address", hostMac, "type", "veth", "peer", "name", "eth0", "address", sandboxMac, "netns", String(pid)], { nice: p.nice });
    // no IPv6 on the host end (no link-local address a sandbox could reach host services on `::` through)
    disableIpv6(hostVeth);
    await hostRules;
    await mustExec("ip", ["-batch", "-"], {
      input: `addr add ${slot.hostIp}/${slot.prefixLength} dev ${hostVeth}\n` + `neigh replace ${slot.ip} lladdr ${sandboxMac} dev ${hostVeth} nud permanent\n` + `link set ${hostVeth} up\n`,
      nice: p.nice,
    });
  })();
  await Promise.all([hostEnd, hostRules, inNetns(["nft", "-f", "-"], sandboxRuleset({ hostIp: slot.hostIp, egress: p.egress, policy: p.policy, served: p.served }))]);
  await inNetns(
    ["ip", "-batch", "-"],
    "link set lo up\n" + `addr add ${slot.ip}/${slot.prefixLength} dev eth0\n` + `neigh replace ${slot.hostIp} lladdr ${hostMac} dev eth0 nud permanent\n` +
      "link set eth0 up\n" + `route add default via ${slot.hostIp} dev eth0\n`,
  );
}

/**
 * The MAC of a veth end: locally administered unicast (02:00) and the end's IPv4 address, so it is
 * unique wherever the address is (each pair is a link of its own; no bridge joins them).
 */
export function macOf(ipv4: string): string {
  return ["02", "00", ...ipv4.split(".").map((o) => Number(o).toString(16).padStart(2, "0"))].join(":");
}

/**
 * Replaces the firewall inside the network namespace of process `pid` in one nft transaction:
 * new connections follow the new rules at once, established ones live on.
 */
export async function replaceFirewall(p: { pid: number; hostIp: string; egress: boolean; policy?: EgressPolicy; served?: ServedPorts }): Promise<void> {
  await mustExec("nsenter", ["-t", String(p.pid), "-n", "nft", "-f", "-"], { input: replaceSandboxTable(p) });
}

/** Deletes the host end (and with it the peer) when it still exists. */
export async function detachSlot(hostVeth: string): Promise<void> {
  const r = await execTool("ip", ["link", "del", hostVeth]);
  if (r.code !== 0 && !/Cannot find device|does not exist/.test(r.stderr)) {
    throw new Error(`ip link del ${hostVeth} failed: ${r.stderr.trim()}`);
  }
}

/** Whether the host end exists. */
export async function hostVethExists(hostVeth: string): Promise<boolean> {
  return (await execTool("ip", ["link", "show", "dev", hostVeth])).code === 0;
}

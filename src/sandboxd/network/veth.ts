import { createHash } from "node:crypto";
import { execTool, mustExec } from "../runtime/exec.js";
import { replaceSandboxTable, sandboxRuleset, type ServedPorts } from "./firewall.js";
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
 * eth0, addresses and a default route via the host end, and the sandbox's firewall.
 */
export async function attachSlot(p: { pid: number; hostVeth: string; slot: Slot; egress: boolean; policy?: EgressPolicy; served?: ServedPorts; nice?: number }): Promise<void> {
  const { pid, hostVeth, slot } = p;
  const inNetns = (cmd: string[], input: string) => mustExec("nsenter", ["-t", String(pid), "-n", ...cmd], { input, nice: p.nice });
  // The firewall goes in while the host makes the pair (they touch different namespaces), and
  // before the sandbox's interface comes up: no packet passes unfiltered.
  await Promise.all([
    mustExec("ip", ["-batch", "-"], {
      input:
        `link add ${hostVeth} type veth peer name eth0 netns ${pid}\n` +
        `addr add ${slot.hostIp}/${slot.prefixLength} dev ${hostVeth}\n` +
        `link set ${hostVeth} up\n`,
      nice: p.nice,
    }),
    inNetns(["nft", "-f", "-"], sandboxRuleset({ hostIp: slot.hostIp, egress: p.egress, policy: p.policy, served: p.served })),
  ]);
  await inNetns(
    ["ip", "-batch", "-"],
    "link set lo up\n" + `addr add ${slot.ip}/${slot.prefixLength} dev eth0\n` + "link set eth0 up\n" + `route add default via ${slot.hostIp} dev eth0\n`,
  );
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

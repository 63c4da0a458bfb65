// The sandbox firewall (the nft table sandboxd installs inside each sandbox's netns) in both
// modes, egress on and off, on a bare network namespace wired exactly as a sandbox's. Every
// destination probed is an address of the test's own veth on this host: nothing leaves the machine.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createServer, type Server } from "node:net";
import { slotAt } from "../../../src/sandboxd/network/ipam.js";
import { attachSlot, detachSlot } from "../../../src/sandboxd/network/veth.js";
import { hostBaseScript, hostTableName, vethScript } from "../../../src/sandboxd/network/host-table.js";
import { skipReason } from "../helpers/runtime.js";

/** Destinations added to the host end: one private, shared, link-local, and one public (TEST-NET-2). */
const EXTRA = { private: "192.168.207.1", shared: "100.64.207.1", linkLocal: "169.254.207.1", public: "198.51.100.207" };

describe("sandbox firewall", { skip: skipReason() }, () => {
  let server: Server;
  let port: number;
  let accepted = 0;
  const holders: ChildProcess[] = [];
  const veths: string[] = [];

  before(async () => {
    server = createServer((c) => {
      accepted++;
      c.destroy();
    });
    await new Promise<void>((r) => server.listen(0, "0.0.0.0", r));
    port = (server.address() as { port: number }).port;
  });
  after(async () => {
    for (const h of holders) h.kill("SIGKILL");
    for (const v of veths) await detachSlot(v).catch(() => undefined);
    server.close();
  });

  /** A netns held by a sleeping process, wired as a sandbox's slot `index` of 198.19.207.0/24. */
  async function netns(index: number, egress: boolean) {
    const holder = spawn("unshare", ["-n", "sleep", "300"], { stdio: "ignore" });
    holders.push(holder);
    for (let i = 0; i < 50; i++) {
      const ns = spawnSync("readlink", [`/proc/${holder.pid}/ns/net`], { encoding: "utf8" }).stdout;
      if (ns && ns !== spawnSync("readlink", ["/proc/self/ns/net"], { encoding: "utf8" }).stdout) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const slot = slotAt("198.19.207.0/24", index);
    const hostVeth = `sbfwtest${index}${process.pid % 1000}`;
    veths.push(hostVeth);
    await attachSlot({ pid: holder.pid!, hostVeth, slot, egress });
    for (const ip of Object.values(EXTRA)) spawnSync("ip", ["addr", "add", `${ip}/32`, "dev", hostVeth]);
    const probe = (ip: string, p = port) =>
      spawnSync("nsenter", ["-t", String(holder.pid), "-n", "timeout", "2", "bash", "-c", `exec 3<>/dev/tcp/${ip}/${p}`]).status === 0 ? "open" : "closed";
    const allow = (p: number) => spawnSync("nsenter", ["-t", String(holder.pid), "-n", "nft", "add", "element", "inet", "sandboxd", "host_tcp", `{ ${p} }`]).status;
    return { slot, probe, allow };
  }

  test("with egress: public destinations open; host end, private, shared and link-local ranges closed; host_tcp opens a port", async () => {
    const ns = await netns(0, true);
    assert.equal(ns.probe(EXTRA.public), "open", "egress mode must let new connections out");
    const before = accepted;
    for (const ip of [ns.slot.hostIp, EXTRA.private, EXTRA.shared, EXTRA.linkLocal]) assert.equal(ns.probe(ip), "closed", ip);
    assert.equal(accepted, before);
    assert.equal(ns.allow(port), 0);
    assert.equal(ns.probe(ns.slot.hostIp), "open", "a port in host_tcp is reachable on the host end");
  });

  test("the host table (NAT out of one interface, a sandbox's veth rules) is valid nft, checked without applying it", () => {
    const table = hostTableName("0123456789");
    const served = { dnsPort: 5353, httpPort: 8080, tlsPort: 8443 };
    const policy = { allow: ["198.51.100.0/24"], deny: ["0.0.0.0/0"], domains: ["example.com"] };
    const script = hostBaseScript({ table, cidr: "198.19.207.0/24", iface: "eth0", served, blocked: ["10.0.0.0/8"] }) +
      vethScript({ table, veth: "sb0123456789abc", ip: "198.19.207.2", hostIp: "198.19.207.1", iface: "eth0", served, policy });
    const r = spawnSync("nft", ["-c", "-f", "-"], { input: script, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    assert.match(script, /oifname "eth0" masquerade/);
    assert.equal(spawnSync("nft", ["list", "table", "inet", table]).status, 1, "nft -c must not have made the table");
  });

  test("without egress: every new outbound connection is dropped, public ones too", async () => {
    const ns = await netns(1, false);
    for (const ip of [EXTRA.public, ns.slot.hostIp, EXTRA.private]) assert.equal(ns.probe(ip), "closed", ip);
  });
});

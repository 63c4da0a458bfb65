// Attacks on the host's network from sandbox root (sudo in the sandbox), against real sandboxd,
// runc and nftables: raw Ethernet frames that skip the sandbox's own firewall, spoofed sources,
// IPv6 over the host end's link-local address, the link-local metadata address, the resolver
// as a tunnel, a second Host on a kept-alive egress-proxy connection; and what a stopped
// sandboxd leaves, and a second instance on an overlapping range. One sandboxd's egress leads
// into a fake Internet (netns hosts on TEST-NET addresses); another has none, as every other test.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { createSocket, type Socket } from "node:dgram";
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createServer, type Server } from "node:net";
import { DNS_PY, KEEPALIVE_PY, RAW_PY, TCP6_PY } from "../helpers/attack-scripts.js";
import { startFakeInternet, type FakeInternet } from "../helpers/fake-internet.js";
import { envdArtifactDir, freePort, NODE, ROOT, sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk as runSdkIn } from "../helpers/sdk-run.js";

const E_CIDR = "198.19.240.0/24";
const LINK = "172.31.240.0/30";
const NETS = ["198.51.100.240/28", "203.0.113.240/28"];
const [A1, , B1] = ["198.51.100.241", "198.51.100.242", "203.0.113.241"];
const METADATA = "169.254.169.254";
const ZONE: Record<string, string> = { "example.com": A1, "other.test": B1 };

/** The host table of the sandboxd on `dataDir`. */
function tableOf(dataDir: string): string {
  return `sandboxd_${createHash("sha256").update(resolve(dataDir)).digest("hex").slice(0, 10)}`;
}

/** Whether nft has that table (family inet, or the ip one older versions made). */
function hasTable(dataDir: string): boolean {
  return ["inet", "ip"].some((f) => spawnSync("nft", ["list", "table", f, tableOf(dataDir)]).status === 0);
}

/** A sandbox's host-side record (its veth, its address and the host end's). */
function recordOf(s: Sandboxd, id: string): { hostVeth: string; ip: string; hostIp: string } {
  return JSON.parse(readFileSync(join(s.dataDir, "runtime", "sandboxes", `${id}.json`), "utf8"));
}

/** The SDK with helpers: `mk(opts)` makes a sandbox with the attack scripts in /tmp; `root(sbx, cmd)` runs a command through sudo and gives its stdout. */
function runSdk(s: Sandboxd, script: string): Promise<any> {
  const prelude = `import { Sandbox, ALL_TRAFFIC } from "e2b";
    const mk = async (opts) => {
      const sbx = await Sandbox.create({ timeoutMs: 600_000, ...opts });
      await sbx.files.write("/tmp/raw.py", ${JSON.stringify(RAW_PY)});
      await sbx.files.write("/tmp/dns.py", ${JSON.stringify(DNS_PY)});
      await sbx.files.write("/tmp/keepalive.py", ${JSON.stringify(KEEPALIVE_PY)});
      await sbx.files.write("/tmp/tcp6.py", ${JSON.stringify(TCP6_PY)});
      return sbx;
    };
    const root = async (sbx, cmd) => {
      const r = await sbx.commands.run("sudo " + cmd, { timeoutMs: 60_000 }).catch((e) => e);
      return (r.stdout ?? "").trim() + ((r.exitCode ?? 0) !== 0 ? " exit " + r.exitCode + " " + (r.stderr ?? "").slice(0, 300) : "");
    };`;
  return runSdkIn(s, script, { prelude, timeoutMs: 300_000 });
}

/** Waits (bounded) until the fake Internet logged a datagram with `payload`. */
async function arrived(net: FakeInternet, payload: string): Promise<string[]> {
  for (let i = 0; i < 300; i++) {
    const log = await net.udpLog();
    if (log.some((l) => l.endsWith(` ${payload}`))) return log;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the marker ${payload} never reached the fake Internet: ${JSON.stringify(await net.udpLog())}`);
}

describe("the host network under attack from sandbox root", { skip: sandboxSkipReason() }, () => {
  let net: FakeInternet;
  /** The instance whose egress leads into the fake Internet, and one without egress. */
  let e: Sandboxd;
  let n: Sandboxd;
  /** A UDP service of the host on `::` (both families): what it received. */
  let hostUdp: Socket;
  let hostUdpPort: number;
  /** A TCP service of the host on \`::\`, and how many connections it accepted. */
  let hostTcp: Server;
  let hostTcpPort: number;
  let hostTcpAccepted = 0;
  /** The first instance without egress (n is its restart after the last test's SIGTERM). */
  let firstN: Sandboxd | undefined;
  const hostGot: string[] = [];
  const waitHost = async (payload: string) => {
    for (let i = 0; i < 300 && !hostGot.includes(payload); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(hostGot.includes(payload), `the marker ${payload} never reached the host service`);
  };

  before(async () => {
    net = await startFakeInternet({ tag: `a${process.pid % 10000}`, sandboxCidr: E_CIDR, link: LINK, nets: NETS, zone: ZONE, tlsNames: ["example.com"], extraHosts: [METADATA] });
    hostUdp = createSocket({ type: "udp6", ipv6Only: false });
    hostUdp.on("message", (m) => hostGot.push(m.toString("latin1")));
    await new Promise<void>((r) => hostUdp.bind(0, "::", r));
    hostUdpPort = hostUdp.address().port;
    hostTcp = createServer((c) => {
      hostTcpAccepted++;
      c.destroy();
    });
    await new Promise<void>((r) => hostTcp.listen({ port: 0, host: "::", ipv6Only: false }, r));
    hostTcpPort = (hostTcp.address() as { port: number }).port;
    e = await startSandboxd({ args: ["--network-cidr", E_CIDR, "--egress-interface", net.iface, "--dns-upstream", net.resolver] });
    n = firstN = await startSandboxd();
  });
  after(async () => {
    await e?.stop();
    await n?.stop();
    if (firstN && firstN !== n) await firstN.stop();
    for (const s of [e, n]) for (const f of ["inet", "ip"]) if (s) spawnSync("nft", ["delete", "table", f, tableOf(s.dataDir)]);
    hostUdp?.close();
    hostTcp?.close();
    net?.stop();
  });

  test("raw frames from a sandbox with allowInternetAccess false never reach a host outside, with egress or without", async () => {
    const got = await runSdk(e, `
      const [off, open] = await Promise.all([mk({ allowInternetAccess: false }), mk({})]);
      const out = { off: await root(off, "python3 /tmp/raw.py 4 self ${B1} 7001 3 bad-offline") };
      out.mark = await root(open, "python3 /tmp/raw.py 4 self ${B1} 7001 3 mark-offline");
      console.log(JSON.stringify(out));
    `);
    assert.match(got.off, /^(sent|EPERM)$/, JSON.stringify(got));
    assert.match(got.mark, /^(sent|EPERM)$/);
    const withoutEgress = await runSdk(n, `
      const off = await mk({ allowInternetAccess: false });
      console.log(JSON.stringify({ off: await root(off, "python3 /tmp/raw.py 4 self ${B1} 7001 3 bad-noegress") }));
    `);
    assert.match(withoutEgress.off, /^(sent|EPERM)$/);
    // a marker sent after the frames: once it is in, the frames had their chance
    if (got.mark === "sent") await arrived(net, "mark-offline");
    spawnSync("bash", ["-c", `echo -n mark-host > /dev/udp/${B1}/7001`]);
    const log = await arrived(net, "mark-host");
    assert.deepEqual(log.filter((l) => /bad-/.test(l)), [], "no raw frame of a sandbox without Internet access got out");
  });

  test("spoofed source addresses are dropped on the host, a neighbour's and one outside the range", async () => {
    const got = await runSdk(e, `
      const sbx = await mk({});
      const ip = (await sbx.commands.run("ip -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1")).stdout.trim();
      const parts = ip.split(".");
      const neighbour = parts.slice(0, 3).concat(String((Number(parts[3]) + 4) % 256)).join(".");
      const out = {
        neighbour: await root(sbx, "python3 /tmp/raw.py 4 " + neighbour + " ${B1} 7001 3 bad-spoof-neighbour"),
        outside: await root(sbx, "python3 /tmp/raw.py 4 198.51.100.77 ${B1} 7001 3 bad-spoof-outside"),
        mark: await root(sbx, "python3 /tmp/raw.py 4 self ${B1} 7001 3 mark-spoof"),
      };
      console.log(JSON.stringify(out));
    `);
    assert.match(got.mark, /^(sent|EPERM)$/, JSON.stringify(got));
    if (got.mark === "sent") await arrived(net, "mark-spoof");
    spawnSync("bash", ["-c", `echo -n mark-host-spoof > /dev/udp/${B1}/7001`]);
    const log = await arrived(net, "mark-host-spoof");
    assert.deepEqual(log.filter((l) => /bad-spoof/.test(l)), []);
  });

  test(`${METADATA} (link-local, cloud credentials) is out of reach by default and whatever allowOut says`, async () => {
    assert.equal(await (await fetch(`http://${METADATA}/`)).text(), `hit ${METADATA}`, "the fake metadata server answers the host");
    const got = await runSdk(e, `
      const [open, named] = await Promise.all([mk({}), mk({ network: { allowOut: ["${METADATA}", "169.254.0.0/16"] } })]);
      const curl = (sbx) => sbx.commands.run("curl -s --connect-timeout 5 -m 10 http://${METADATA}/ || echo closed").then((r) => r.stdout.trim(), () => "closed");
      const out = {
        open: await curl(open),
        named: await curl(named),
        raw: await root(open, "python3 /tmp/raw.py 4 self ${METADATA} 7001 3 bad-metadata"),
        rawNamed: await root(named, "python3 /tmp/raw.py 4 self ${METADATA} 7001 3 bad-metadata-named"),
        mark: await root(open, "python3 /tmp/raw.py 4 self ${B1} 7001 3 mark-metadata"),
      };
      console.log(JSON.stringify(out));
    `);
    assert.equal(got.open, "closed");
    assert.equal(got.named, "closed", "allowOut never opens link-local (as E2B's always-denied ranges)");
    if (got.mark === "sent") await arrived(net, "mark-metadata");
    spawnSync("bash", ["-c", `echo -n mark-host-metadata > /dev/udp/${B1}/7001`]);
    const log = await arrived(net, "mark-host-metadata");
    assert.deepEqual(log.filter((l) => /bad-metadata/.test(l)), []);
  });

  test("host services: nothing over IPv6 to the host end's link-local address, no raw frame to another host address", async () => {
    const made = await runSdk(n, `
      const sbx = await mk({});
      const out = { id: sbx.sandboxId };
      // a plain socket first: the host end has no link-local address to connect to
      out.tcp6 = await root(sbx, "python3 /tmp/tcp6.py ${hostTcpPort}");
      out.v6 = await root(sbx, "python3 /tmp/raw.py 6 ll ll ${hostUdpPort} 3 bad-v6-linklocal");
      out.v4 = await root(sbx, "python3 /tmp/raw.py 4 self ${LINK.replace(/0\/30$/, "1")} ${hostUdpPort} 3 bad-v4-hostaddr");
      console.log(JSON.stringify(out));
    `);
    assert.match(made.v6, /^(sent|EPERM)$/, JSON.stringify(made));
    // a marker from the host itself, after the sandbox's frames
    hostUdp.send("mark-v6", hostUdpPort, "::1");
    await waitHost("mark-v6");
    assert.deepEqual(hostGot.filter((m) => m.startsWith("bad-")), [], "the host service got nothing from the sandbox");
    assert.match(made.tcp6, /^closed/, "the host's TCP service on :: is not reachable over the veth");
    assert.equal(hostTcpAccepted, 0);
    const rec = recordOf(n, made.id);
    assert.equal(readFileSync(`/proc/sys/net/ipv6/conf/${rec.hostVeth}/disable_ipv6`, "utf8").trim(), "1", "IPv6 is off on the host end");
    assert.deepEqual(JSON.parse(spawnSync("ip", ["-j", "-6", "addr", "show", "dev", rec.hostVeth], { encoding: "utf8" }).stdout || "[]").flatMap((l: { addr_info: unknown[] }) => l.addr_info), []);
  });

  test("the resolver answers only allowed names and caps a sandbox's queries; the egress proxy refuses a second Host on a kept-alive connection", async () => {
    const got = await runSdk(e, `
      const sbx = await mk({ network: { allowOut: ["example.com"], denyOut: [ALL_TRAFFIC] } });
      const dns = JSON.parse(await root(sbx, "python3 /tmp/dns.py 400 example.com other.test Example.COM."));
      const keep = JSON.parse(await root(sbx, "python3 /tmp/keepalive.py example.com"));
      console.log(JSON.stringify({ dns, keep }));
    `);
    assert.equal(got.dns["example.com"], 0, "an allowed name is answered");
    assert.equal(got.dns["Example.COM."], 0, "names match without case and final dot");
    assert.ok([3, 5].includes(got.dns["other.test"]), `a name no rule allows is refused: ${JSON.stringify(got.dns)}`);
    assert.ok(got.dns.burst > 0 && got.dns.burst < 200, `a burst of 400 queries is cut to the sandbox's budget: ${got.dns.burst} answered`);
    assert.equal(got.keep.first, "host example.com");
    assert.equal(got.keep.second, "closed", "the second request, for another name, is refused");
    assert.match(got.keep.pipelined, /host example\.com/);
    assert.doesNotMatch(got.keep.pipelined, /other\.test/, "a pipelined request for another name reaches no server");
  });

  test("a second sandboxd whose range overlaps a live instance's refuses to start and names it", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "sandboxd-data-"));
    chmodSync(dataDir, 0o755);
    try {
      const port = await freePort();
      const child = spawn(NODE, [join(ROOT, "dist", "sandboxd"), "serve", "--listen", `127.0.0.1:${port}`, "--domain", "e2b.localhost", "--data-dir", dataDir,
        "--network-cidr", "198.19.240.128/25", "--egress-interface", "none", "--envd-dir", envdArtifactDir()], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, SANDBOXD_WARM_POOL: "0" } });
      let out = "";
      child.stdout.on("data", (c: Buffer) => (out += c));
      child.stderr.on("data", (c: Buffer) => (out += c));
      // it either exits (refused) or gets as far as printing its lines (started: the failure this test is for)
      const code = await new Promise<number | null | "started">((r) => {
        child.once("exit", (c) => r(c));
        child.stdout.on("data", () => {
          if (/^E2B_DOMAIN=/m.test(out)) r("started");
        });
      });
      if (code === "started") {
        child.kill("SIGKILL");
        hasTable(dataDir) && spawnSync("nft", ["delete", "table", "inet", tableOf(dataDir)]);
      }
      assert.equal(code, 1, out);
      assert.match(out, new RegExp(`198\\.19\\.240\\.0/24.*${tableOf(e.dataDir)}`), out);
      assert.equal(hasTable(dataDir), false, "the refused instance made no table");
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("the host table: there without egress too, kept for sandboxes that outlive sandboxd, removed by a SIGTERM that leaves none", async () => {
    assert.ok(hasTable(n.dataDir), "an instance without egress has its host table too");
    // n still has sandboxes (made above): a SIGTERM keeps the table for them
    assert.equal(await n.terminate(), 0);
    assert.ok(hasTable(n.dataDir), "sandboxes left running keep their host rules");
    const restarted = await startSandboxd({ dataDir: n.dataDir });
    n = restarted;
    const list = await runSdk(n, `
      const all = await Sandbox.list().nextItems();
      await Promise.all(all.map((x) => Sandbox.kill(x.sandboxId)));
      console.log(JSON.stringify(all.length));
    `);
    assert.ok(list > 0);
    assert.equal(await n.terminate(), 0);
    assert.equal(hasTable(n.dataDir), false, "a sandboxd stopped with no sandbox leaves no table");
    await runSdk(e, `
      const all = await Sandbox.list().nextItems();
      await Promise.all(all.map((x) => Sandbox.kill(x.sandboxId)));
      console.log("0");
    `);
    assert.equal(await e.terminate(), 0);
    assert.equal(hasTable(e.dataDir), false, "with an egress interface too");
  });
});

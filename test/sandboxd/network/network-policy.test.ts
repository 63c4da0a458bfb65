// Outbound network policy end to end: a real sandboxd whose only egress interface leads into a
// fake Internet this test builds (TEST-NET hosts in a netns of its own), sandboxes made and
// updated with the published SDK, probes run inside them with curl and python. A guard table on
// the host counts any sandbox packet forwarded elsewhere and any packet to the fake hosts leaving
// through the uplink; the suite ends by asserting both are 0.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, realpathSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { basename, join, resolve } from "node:path";
import { api } from "../helpers/api-client.js";
import { startFakeInternet, type FakeInternet } from "../helpers/fake-internet.js";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk as runSdkIn } from "../helpers/sdk-run.js";

const SANDBOX_CIDR = "198.19.220.0/24";
const LINK = "172.31.229.0/30";
/** The fake hosts: A1, A2 in 198.51.100.224/28, B1, B2 in 203.0.113.224/28 (the host itself sits on 192.0.2.0/24). */
const NETS = ["198.51.100.224/28", "203.0.113.224/28"];
const [A1, A2, B1, B2] = ["198.51.100.225", "198.51.100.226", "203.0.113.225", "203.0.113.226"];
const ALL = [A1, A2, B1, B2];
/** The test resolver's zone: names of the fake hosts, and one that points into a private range. */
const ZONE: Record<string, string> = {
  "example.com": A1, "www.example.com": A2, "deep.sub.example.com": A2, "other.test": B1, "evil.test": B2, "private.example.com": "172.31.229.2",
};

/** A shell function run inside sandboxes: `p TARGET` prints "TARGET=open" when an HTTP GET gets an answer, else "TARGET=closed". */
const PROBE_FN = `p() { if out=$(curl -s --connect-timeout 5 -m 10 "http://$1/") && [ -n "$out" ]; then echo "$1=open"; else echo "$1=closed"; fi; }`;

/** SDK-side helper: probes every target at once from inside a sandbox; resolves { target: "open" | "closed" }. */
const PROBE_JS = `
  const probe = async (sbx, targets) => {
    const r = await sbx.commands.run(${JSON.stringify(PROBE_FN)} + "; " + targets.map((t) => "p " + t + " &").join(" ") + " wait", { timeoutMs: 60_000 });
    return Object.fromEntries(r.stdout.trim().split("\\n").map((l) => l.split("=")));
  };
`;

/** The SDK with the probe helpers, given more time (flows under test may be refused slowly). */
function runSdk(s: Sandboxd, script: string): Promise<any> {
  return runSdkIn(s, script, { prelude: `import { Sandbox, ALL_TRAFFIC } from "e2b";\n${PROBE_JS}`, timeoutMs: 240_000 });
}

/** What a probe should find: each target open or closed. */
function expect(open: string[], closed: string[]): Record<string, string> {
  return Object.fromEntries([...open.map((t) => [t, "open"]), ...closed.map((t) => [t, "closed"])]);
}

describe("network policy: allowOut / denyOut enforced in the sandbox's netns, with a fake Internet", { skip: sandboxSkipReason() }, () => {
  let s: Sandboxd;
  /** The first sandboxd, which owns the data dir (s is a restarted one after the restart test). */
  let first: Sandboxd | undefined;
  let ca: Buffer;
  let net: FakeInternet;
  let hostHttp: Server;
  let hostPort: number;
  let hostAddr: string;

  before(async () => {
    net = await startFakeInternet({ tag: String(process.pid % 100000), sandboxCidr: SANDBOX_CIDR, link: LINK, nets: NETS, zone: ZONE, tlsNames: ["example.com", "*.example.com", "deep.sub.example.com", "other.test", "evil.test"] });
    // The host's own listener on every address: sandboxes must not reach it whatever they allow.
    hostHttp = createServer((_q, r) => r.end("host"));
    await new Promise<void>((r) => hostHttp.listen(0, "0.0.0.0", r));
    hostPort = (hostHttp.address() as { port: number }).port;
    hostAddr = (JSON.parse(spawnSync("ip", ["-j", "-4", "addr", "show", "dev", net.uplink], { encoding: "utf8" }).stdout) as { addr_info: { local: string }[] }[])[0].addr_info[0].local;
    s = first = await startSandboxd({ args: sandboxdArgs() });
    ca = readFileSync(s.caFile);
  });
  const sandboxdArgs = () => ["--network-cidr", SANDBOX_CIDR, "--egress-interface", net.iface, "--dns-upstream", net.resolver];
  after(async () => {
    await s?.stop();
    if (first && first !== s) await first.stop();
    // a sandboxd stopped with no sandbox removes its host table; this makes sure of it whatever happened
    if (s) spawnSync("nft", ["delete", "table", "inet", `sandboxd_${createHash("sha256").update(resolve(s.dataDir)).digest("hex").slice(0, 10)}`]);
    hostHttp?.close();
    net?.stop();
  });

  test("the fake hosts are routed into the fake Internet only, and answer the host directly", async () => {
    for (const h of ALL) {
      assert.match(spawnSync("ip", ["route", "get", h], { encoding: "utf8" }).stdout, new RegExp(`dev ${net.iface} `), h);
      assert.equal(await (await fetch(`http://${h}/`)).text(), `hit ${h}`);
    }
    assert.equal(await (await fetch(`http://172.31.229.2/`)).text(), "hit 172.31.229.2", "the fake side's private address answers the host");
  });

  test("no rules: all open; deny by IP and CIDR; allow by IP and CIDR beats deny-all; allow_internet_access false closes all", async () => {
    const got = await runSdk(s, `
      const mk = (opts) => Sandbox.create({ timeoutMs: 180_000, ...opts });
      const [open, denied, allowed, offline] = await Promise.all([
        mk({}),
        mk({ network: { denyOut: [${JSON.stringify(A1)}, "203.0.113.224/28"] } }),
        mk({ network: { allowOut: [${JSON.stringify(A2)}, "203.0.113.224/28"], denyOut: [ALL_TRAFFIC] } }),
        mk({ allowInternetAccess: false, network: { denyOut: [${JSON.stringify(A1)}] } }),
      ]);
      const targets = ${JSON.stringify(ALL)};
      const out = {};
      out.open = await probe(open, targets);
      out.udp = (await open.commands.run("python3 -c \\"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5); s.sendto(b'ping', ('${B1}', 7001)); print(s.recv(10).decode())\\"")).stdout.trim();
      out.denied = await probe(denied, targets);
      out.allowed = await probe(allowed, targets);
      out.offline = await probe(offline, targets);
      out.info = (await Sandbox.getInfo(allowed.sandboxId)).network ?? null;
      out.offlineInfo = (await offline.getInfo()).allowInternetAccess ?? null;
      await Promise.all([open, denied, allowed, offline].map((x) => x.kill()));
      console.log(JSON.stringify(out));
    `);
    assert.deepEqual(got.open, expect(ALL, []));
    assert.equal(got.udp, "ping", "non-TCP to an allowed destination passes");
    assert.deepEqual(got.denied, expect([A2], [A1, B1, B2]));
    assert.deepEqual(got.allowed, expect([A2, B1, B2], [A1]));
    assert.deepEqual(got.offline, expect([], ALL));
    assert.deepEqual(got.info?.allowOut, [A2, "203.0.113.224/28"]);
    assert.deepEqual(got.info?.denyOut, ["0.0.0.0/0"]);
    assert.equal(got.offlineInfo, false);
  });

  test("private, link-local and the host's own addresses stay closed whatever allowOut says", async () => {
    const targets = ["172.31.229.2", `172.31.229.1:${hostPort}`, `198.19.220.1:${hostPort}`, `${hostAddr}:${hostPort}`, `127.0.0.1:${hostPort}`];
    // Reachable from the host itself: the sandbox's closed is the firewall's doing.
    assert.equal(await (await fetch(`http://172.31.229.1:${hostPort}/`)).text(), "host");
    const got = await runSdk(s, `
      const sbx = await Sandbox.create({ timeoutMs: 120_000, network: {
        allowOut: ["10.0.0.0/8", "172.16.0.0/12", "172.31.229.2", "169.254.0.0/16", "127.0.0.1", "192.0.2.0/24", ${JSON.stringify(hostAddr)}, "0.0.0.0/1", "128.0.0.0/1"],
      } });
      const out = { probe: await probe(sbx, ${JSON.stringify(targets)}), fake: await probe(sbx, [${JSON.stringify(A1)}]) };
      await sbx.kill();
      console.log(JSON.stringify(out));
    `);
    assert.deepEqual(got.probe, expect([], targets));
    assert.deepEqual(got.fake, expect([A1], []), "public destinations are still open");
  });

  test("updateNetwork tightens and loosens a live sandbox: new connections follow, an open one survives", async () => {
    const got = await runSdk(s, `
      const sbx = await Sandbox.create({ timeoutMs: 180_000 });
      const out = {};
      const targets = ${JSON.stringify(ALL)};
      out.before = await probe(sbx, targets);
      // One TCP connection to B1's echo port, kept open across the updates: a line a second, the replies logged.
      const live = "import socket,time\\ns=socket.create_connection(('${B1}',7000),timeout=5)\\nwhile True:\\n  s.sendall(b'x\\\\n'); d=s.recv(10)\\n  open('/tmp/live.log','a').write('ok\\\\n' if d else 'eof\\\\n'); time.sleep(0.3)\\n";
      await sbx.files.write("/tmp/live.py", live);
      await sbx.commands.run("python3 /tmp/live.py", { background: true });
      const lines = async () => (await sbx.commands.run("cat /tmp/live.log 2>/dev/null | grep -c ok || true")).stdout.trim();
      for (let i = 0; i < 50 && Number(await lines()) < 2; i++) await new Promise((r) => setTimeout(r, 200));
      await sbx.updateNetwork({ denyOut: [ALL_TRAFFIC] });
      out.tight = await probe(sbx, targets);
      const n1 = Number(await lines());
      await new Promise((r) => setTimeout(r, 1500));
      out.liveGrew = Number(await lines()) > n1;
      out.tightInfo = (await sbx.getInfo()).network ?? null;
      await sbx.updateNetwork({ allowOut: ["198.51.100.224/28"], denyOut: [ALL_TRAFFIC] });
      out.partial = await probe(sbx, targets);
      await sbx.updateNetwork({});
      out.loose = await probe(sbx, targets);
      out.looseInfo = (await sbx.getInfo()).network ?? null;
      await sbx.updateNetwork({ allowInternetAccess: false });
      out.offline = await probe(sbx, targets);
      await sbx.kill();
      out.afterKill = await sbx.updateNetwork({}).then(() => "ok", (e) => e.name);
      console.log(JSON.stringify(out));
    `);
    assert.deepEqual(got.before, expect(ALL, []));
    assert.deepEqual(got.tight, expect([], ALL));
    assert.equal(got.liveGrew, true, "the connection opened before the update keeps working");
    assert.deepEqual(got.tightInfo?.denyOut, ["0.0.0.0/0"]);
    assert.deepEqual(got.partial, expect([A1, A2], [B1, B2]));
    assert.deepEqual(got.loose, expect(ALL, []));
    assert.equal(got.looseInfo?.denyOut, undefined, "an omitted field clears that rule");
    assert.deepEqual(got.offline, expect([], ALL));
    assert.equal(got.afterKill, "SandboxNotFoundError");
  });

  test("sandbox root cannot undo the policy: nft flush ruleset, routes, links and raw sockets change nothing", async () => {
    const id = await runSdk(s, `
      const sbx = await Sandbox.create({ timeoutMs: 180_000, network: { denyOut: [ALL_TRAFFIC] } });
      console.log(JSON.stringify(sbx.sandboxId));
    `);
    // The host's nft and the libraries it loads, put into the sandbox through the SDK (the
    // sandbox has no nft of its own, and its rootfs is mounted only in its own mount namespace).
    const libs = spawnSync("ldd", ["/usr/sbin/nft"], { encoding: "utf8" }).stdout.split("\n").map((l) => /(\/\S+)/.exec(l)?.[1]).filter((x): x is string => !!x);
    const nftFiles = ["/usr/sbin/nft", ...libs].map((f) => [basename(f), realpathSync(f)]);
    const loader = basename(libs.find((l) => l.includes("ld-linux"))!);
    const pid = JSON.parse(spawnSync("runc", ["--root", join(s.dataDir, "runc"), "state", id], { encoding: "utf8" }).stdout).pid as number;
    const table = () => spawnSync("nsenter", ["-t", String(pid), "-n", "nft", "list", "table", "inet", "sandboxd"], { encoding: "utf8" }).stdout;
    const tableBefore = table();
    assert.match(tableBefore, /0\.0\.0\.0\/0/);
    const udpBefore = await net.udpCount();
    const got = await runSdk(s, `
      const sbx = await Sandbox.connect(${JSON.stringify(id)});
      const { readFileSync } = await import("node:fs");
      for (const [name, from] of ${JSON.stringify(nftFiles)}) await sbx.files.write("/tmp/nft/" + name, readFileSync(from));
      await sbx.commands.run("chmod +x /tmp/nft/*");
      const root = async (cmd) => { const r = await sbx.commands.run(cmd, { user: "root" }).catch((e) => e); return { code: r.exitCode, err: (r.stderr ?? "").slice(0, 200) }; };
      const nft = "/tmp/nft/${loader} --library-path /tmp/nft /tmp/nft/nft";
      const out = {};
      out.nftList = await root(nft + " list ruleset");
      out.nftFlush = await root(nft + " flush ruleset");
      out.nftSudo = (await sbx.commands.run("sudo " + nft + " delete table inet sandboxd").catch((e) => e)).exitCode;
      out.route = await root("ip route add ${NETS[0]} dev eth0");
      out.link = await root("ip link set eth0 down");
      out.addr = await root("ip addr add 198.19.220.9/24 dev eth0");
      out.unshare = await root("unshare -n true");
      out.raw = (await sbx.commands.run("python3 -c \\"import socket\\nfor t in ('${B1}','${A1}'):\\n  s=socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)\\n  try: s.sendto(bytes([0x1f,0x41,0x1b,0x59,0,12,0,0])+b'raw!', (t, 0)); print('sent')\\n  except OSError as e: print(e.errno)\\n\\"", { user: "root" }).catch((e) => e)).stdout.trim();
      out.udp = (await sbx.commands.run("python3 -c \\"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('${B1}', 7001))\\"", { user: "root" }).catch((e) => e)).exitCode;
      out.probe = await probe(sbx, ${JSON.stringify(ALL)});
      await sbx.kill();
      console.log(JSON.stringify(out));
    `);
    assert.equal(got.nftList.code === 0, false, `nft list ruleset must fail inside: ${JSON.stringify(got.nftList)}`);
    assert.match(got.nftList.err, /Operation not permitted|Permission denied/, "nft itself ran and was refused");
    assert.notEqual(got.nftFlush.code, 0);
    assert.notEqual(got.nftSudo, 0);
    for (const k of ["route", "link", "addr", "unshare"]) assert.notEqual(got[k].code, 0, `${k}: ${JSON.stringify(got[k])}`);
    assert.deepEqual(got.probe, expect([], ALL));
    assert.equal(await net.udpCount(), udpBefore, "no datagram (raw or not) reached the fake Internet");
    assert.equal(table(), "", "the sandbox is gone with its netns");
    assert.ok(tableBefore.includes("@deny drop"));
  });

  test("domain rules: exact, *.wildcard and * through the egress proxy; Host, SNI and /etc/hosts tricks; names into private ranges refused", async () => {
    const got = await runSdk(s, `
      const mk = (opts) => Sandbox.create({ timeoutMs: 180_000, ...opts });
      const [exact, wild, all, offline] = await Promise.all([
        mk({ network: { allowOut: ["example.com"], denyOut: [ALL_TRAFFIC] } }),
        mk({ network: { allowOut: ["*.example.com"], denyOut: [ALL_TRAFFIC] } }),
        mk({ network: { allowOut: ["*"], denyOut: [ALL_TRAFFIC] } }),
        mk({ allowInternetAccess: false }),
      ]);
      // The fake Internet's CA in each sandbox's trust bundle (what update-ca-certificates would
      // write, without its ~150 openssl runs per sandbox that a loaded 2-core machine takes a minute over).
      await Promise.all([exact, wild, all, offline].map(async (x) => {
        await x.files.write("/tmp/fake-internet.crt", ${JSON.stringify(net.caPem)}, { user: "root" });
        await x.commands.run("cat /tmp/fake-internet.crt >> /etc/ssl/certs/ca-certificates.crt", { user: "root" });
      }));
      const run = async (x, cmd) => (await x.commands.run(cmd, { user: "root", timeoutMs: 30_000 }).catch((e) => e)).stdout?.trim() ?? "";
      const curl = async (x, args) => (await run(x, "curl -s --connect-timeout 10 -m 20 " + args + " || true")) || "closed";
      const tcp = (x, host, port) => run(x, "python3 -c \\"import socket; socket.create_connection(('" + host + "'," + port + "),timeout=3); print('open')\\" 2>/dev/null || echo closed");
      const out = {};
      out.exact = {
        dns: await run(exact, "getent hosts example.com | cut -d' ' -f1"),
        http: await curl(exact, "http://example.com/"),
        https: await curl(exact, "https://example.com/"),
        sub: await curl(exact, "http://www.example.com/"),
        other: await curl(exact, "https://other.test/"),
        port7000: await tcp(exact, "example.com", 7000),
        hostTrick: await curl(exact, "-H 'Host: example.com' http://${B1}/"),
        sniTrick: await curl(exact, "--resolve example.com:443:${B1} https://example.com/"),
        sniOther: await curl(exact, "--resolve other.test:443:${A1} https://other.test/"),
        hostOther: await curl(exact, "-H 'Host: other.test' http://${A1}/"),
      };
      await run(exact, "echo '${B1} example.com' >> /etc/hosts");
      out.spoof = { dns: await run(exact, "getent hosts example.com | cut -d' ' -f1"), http: await curl(exact, "http://example.com/"), https: await curl(exact, "https://example.com/") };
      out.wild = {
        www: await curl(wild, "http://www.example.com/"),
        deep: await curl(wild, "https://deep.sub.example.com/"),
        apex: await curl(wild, "http://example.com/"),
        privateName: await curl(wild, "http://private.example.com/"),
        privateByHost: await curl(wild, "-H 'Host: private.example.com' http://${B1}/"),
      };
      out.all = {
        other: await curl(all, "http://other.test/"),
        evil: await curl(all, "https://evil.test/"),
        port7000: await tcp(all, "${B1}", 7000),
        privateByHost: await curl(all, "-H 'Host: private.example.com' http://${B1}/"),
      };
      out.offline = { dns: await run(offline, "getent hosts example.com | cut -d' ' -f1 | grep . || echo none"), http: await curl(offline, "http://example.com/") };
      await offline.updateNetwork({ allowOut: ["example.com"], denyOut: [ALL_TRAFFIC] });
      out.updated = { dns: await run(offline, "getent hosts example.com | cut -d' ' -f1"), http: await curl(offline, "http://example.com/"), other: await curl(offline, "http://other.test/") };
      await Promise.all([exact, wild, all, offline].map((x) => x.kill()));
      console.log(JSON.stringify(out));
    `);
    assert.deepEqual(got.exact, {
      dns: A1, http: `hit ${A1}`, https: `tls hit ${A1} example.com`, sub: "closed", other: "closed", port7000: "closed",
      hostTrick: `hit ${A1}`, sniTrick: `tls hit ${A1} example.com`, sniOther: "closed", hostOther: "closed",
    });
    assert.deepEqual(got.spoof, { dns: B1, http: `hit ${A1}`, https: `tls hit ${A1} example.com` }, "the proxy dials the name, not what /etc/hosts says");
    assert.deepEqual(got.wild, { www: `hit ${A2}`, deep: `tls hit ${A2} deep.sub.example.com`, apex: "closed", privateName: "closed", privateByHost: "closed" });
    assert.deepEqual(got.all, { other: `hit ${B1}`, evil: `tls hit ${B2} evil.test`, port7000: "closed", privateByHost: "closed" });
    assert.deepEqual(got.offline, { dns: "none", http: "closed" }, "no resolver for a sandbox that may reach nothing");
    assert.deepEqual(got.updated, { dns: A1, http: `hit ${A1}`, other: "closed" });
  });

  test("across a sandboxd restart a live sandbox keeps its rules and reaches the new resolver and egress proxy", async () => {
    const script = (id?: string) => `
      const sbx = ${id ? `await Sandbox.connect(${JSON.stringify(id)})` : `await Sandbox.create({ timeoutMs: 180_000, network: { allowOut: ["example.com", ${JSON.stringify(B2)}], denyOut: [ALL_TRAFFIC] } })`};
      const curl = async (args) => (await sbx.commands.run("curl -s --connect-timeout 10 -m 20 " + args + " || true")).stdout.trim() || "closed";
      console.log(JSON.stringify({ id: sbx.sandboxId, byName: await curl("http://example.com/"), byIp: await curl("http://${B2}/"), other: await curl("http://other.test/") }));
    `;
    const want = { byName: `hit ${A1}`, byIp: `hit ${B2}`, other: "closed" };
    const before = await runSdk(s, script());
    assert.deepEqual({ ...before, id: undefined }, { ...want, id: undefined });
    assert.equal(await s.terminate(), 0);
    s = await startSandboxd({ dataDir: s.dataDir, args: sandboxdArgs() });
    const afterRestart = await runSdk(s, script(before.id));
    assert.deepEqual(afterRestart, { ...want, id: before.id });
  });

  test("nothing left the machine: no sandbox packet forwarded anywhere but the fake Internet, none to its hosts out of the uplink", () => {
    assert.ok(net.forwarded() > 0, "the guard saw the sandboxes' traffic into the fake Internet");
    assert.equal(net.leaks(), 0);
  });
});

describe("network policy: the API's validation and PUT /sandboxes/{id}/network answers", { skip: sandboxSkipReason() }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  before(async () => {
    s = await startSandboxd({ args: ["--network-cidr", "198.19.221.0/24"] });
    ca = readFileSync(s.caFile);
  });
  after(async () => {
    await s?.stop();
  });

  test("create: deny entries must be IPs or CIDRs (not unspecified), domains in allow need ALL_TRAFFIC denied", async () => {
    const domainMsg = "When specifying allowed domains in allow out, you must include 'ALL_TRAFFIC' in deny out to block all other traffic.";
    const cases: [unknown, number, string][] = [
      [{ denyOut: ["example.com"] }, 400, "invalid denied CIDR example.com"],
      [{ denyOut: ["0.0.0.0"] }, 400, "invalid denied CIDR 0.0.0.0"],
      [{ denyOut: ["::/0"] }, 400, "invalid denied CIDR ::/0"],
      [{ denyOut: ["10.0.0.0/33"] }, 400, "invalid denied CIDR 10.0.0.0/33"],
      [{ denyOut: ["1.2.3.4", "1.2.3.0/24", "2001:db8::/32"], allowOut: ["8.8.8.8"] }, 201, ""],
      [{ allowOut: ["example.com"] }, 400, domainMsg],
      [{ allowOut: ["*.example.com"], denyOut: ["1.2.3.4"] }, 400, domainMsg],
      [{ allowOut: ["example.com", "*.example.com", "*"], denyOut: ["0.0.0.0/0"] }, 201, ""],
      [{ allowOut: "1.2.3.4" }, 400, 'validation error: field "network.allowOut" must be an array of strings'],
    ];
    for (const [network, status, message] of cases) {
      const r = await api(s, ca, "POST", "/sandboxes", { body: { templateID: "base", timeout: 60, network } });
      assert.equal(r.status, status, `${JSON.stringify(network)}: ${r.body}`);
      if (status === 400) assert.deepEqual(r.json, { code: 400, message });
      else assert.equal((await api(s, ca, "DELETE", `/sandboxes/${r.json.sandboxID}`)).status, 204);
    }
  });

  test("PUT /sandboxes/{id}/network: 204, the same 400s, 403 egressProxy, 404 unknown, 409 paused", async () => {
    const c = await api(s, ca, "POST", "/sandboxes", { body: { templateID: "base", timeout: 120, network: { denyOut: ["1.2.3.4"], maskRequestHost: "m" } } });
    assert.equal(c.status, 201, c.body);
    const id = c.json.sandboxID as string;
    const put = (body: unknown, sid = id) => api(s, ca, "PUT", `/sandboxes/${sid}/network`, { body });
    const ok = await put({ allowOut: ["5.6.7.8/32"] });
    assert.equal(ok.status, 204, ok.body);
    assert.equal(ok.body, "");
    const info = (await api(s, ca, "GET", `/sandboxes/${id}`)).json;
    assert.deepEqual(info.network.allowOut, ["5.6.7.8/32"]);
    assert.equal(info.network.denyOut, undefined, "the omitted deny list is cleared");
    assert.equal(info.network.maskRequestHost, "m", "fields other than the egress rules stay");
    assert.deepEqual((await put({ denyOut: ["nope"] })).json, { code: 400, message: "invalid denied CIDR nope" });
    assert.deepEqual((await put({ allowOut: ["example.com"] })).json.code, 400);
    assert.deepEqual((await put({ allowOut: 1 })).json, { code: 400, message: 'validation error: field "allowOut" must be an array of strings' });
    assert.equal((await put({ egressProxy: { address: "p:1080" } })).status, 403);
    assert.equal((await api(s, ca, "PUT", `/sandboxes/${id}/network`, { raw: "[]" })).status, 400);
    assert.equal((await api(s, ca, "PUT", `/sandboxes/${id}/network`)).status, 204, "no body: every rule cleared");
    const unknown = await put({}, "i" + "0".repeat(20));
    assert.deepEqual(unknown.json, { code: 404, message: `Sandbox "i${"0".repeat(20)}" doesn't exist or you don't have access to it` });
    assert.equal((await api(s, ca, "PUT", `/sandboxes/${id}/network`, { body: {}, key: "e2b_" + "0".repeat(40) })).status, 401);
    assert.equal((await api(s, ca, "POST", `/sandboxes/${id}/pause`)).status, 204);
    const paused = await put({});
    assert.equal(paused.status, 409, paused.body);
    assert.equal(paused.json.code, 409);
    assert.equal((await api(s, ca, "DELETE", `/sandboxes/${id}`)).status, 204);
  });
});

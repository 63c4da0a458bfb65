// A fake Internet for network-policy tests: a network namespace the test makes, holding hosts on
// TEST-NET addresses with HTTP, HTTPS (a test CA's certificate), TCP-echo and UDP-echo servers
// and a resolver for a test zone, joined to the host by a veth whose
// host end is what sandboxd gets as --egress-interface. Host routes send only the fake hosts'
// /28s into it. A guard table on the host counts any packet from the sandboxes' range forwarded
// anywhere else and any packet to the fake hosts leaving through the uplink: both must stay 0.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NODE } from "./sandboxd.js";

/**
 * The servers' script: HTTP on 80 answers "hit <address it was reached on>" (GET /host: the Host
 * it was asked for), TCP echo on 7000, UDP echo on 7001 (counted, and logged as "<address>
 * <payload>" for GET /udp-log).
 */
const SERVER_JS = `
const http = require("node:http"), https = require("node:https"), net = require("node:net"), dgram = require("node:dgram"), fs = require("node:fs");
const [dir, resolverIp, zoneJson, ...hosts] = process.argv.slice(2);
const zone = JSON.parse(zoneJson);
let udp = 0;
const udpLog = [];
// GET /bulk/<MiB> streams that many MiB of zeros (throughput measurements).
const MIB = Buffer.alloc(1 << 20);
const bulk = (req, res) => {
  const m = /^\\/bulk\\/(\\d+)$/.exec(req.url);
  if (!m) return false;
  let left = Number(m[1]);
  res.writeHead(200, { "content-length": left * MIB.length });
  const more = () => { while (left > 0) { left--; if (!res.write(MIB)) return res.once("drain", more); } res.end(); };
  more();
  return true;
};
https.createServer({ key: fs.readFileSync(dir + "/srv.key"), cert: fs.readFileSync(dir + "/srv.crt") }, (req, res) => {
  if (!bulk(req, res)) res.end("tls hit " + req.socket.localAddress + " " + req.socket.servername);
}).listen(443, "0.0.0.0");
// The test resolver: A records from the zone, NXDOMAIN for the rest (one question per query).
const dns = dgram.createSocket("udp4");
dns.on("message", (q, r) => {
  let o = 12; const labels = [];
  while (q[o] > 0) { labels.push(q.subarray(o + 1, o + 1 + q[o]).toString()); o += 1 + q[o]; }
  const name = labels.join(".").toLowerCase(), qtype = q.readUInt16BE(o + 1), end = o + 5;
  const ip = zone[name];
  const answer = ip && qtype === 1 ? Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, ...ip.split(".").map(Number)]) : Buffer.alloc(0);
  const head = Buffer.from(q.subarray(0, 12));
  head.writeUInt16BE(0x8180 | (ip ? 0 : 3), 2); head.writeUInt16BE(1, 4); head.writeUInt16BE(answer.length ? 1 : 0, 6); head.writeUInt32BE(0, 8);
  dns.send(Buffer.concat([head, q.subarray(12, end), answer]), r.port, r.address);
});
dns.bind(53, resolverIp);
http.createServer((req, res) => {
  if (req.url === "/udp-count") return res.end(String(udp));
  if (req.url === "/udp-log") return res.end(JSON.stringify(udpLog));
  if (req.url === "/host") return res.end("host " + req.headers.host);
  if (bulk(req, res)) return;
  res.end("hit " + req.socket.localAddress);
}).listen(80, "0.0.0.0");
// a sandbox killed or a flow cut by a policy update resets its connection: that is no reason to stop
net.createServer((c) => { c.on("error", () => c.destroy()); c.pipe(c); }).listen(7000, "0.0.0.0");
// one socket per address, so that replies come from the address the datagram was sent to
let bound = 0;
for (const ip of hosts) {
  const u = dgram.createSocket("udp4");
  u.on("message", (m, r) => { udp++; if (udpLog.length < 1000) udpLog.push(ip + " " + m.toString("latin1").slice(0, 64)); u.send(m, r.port, r.address); });
  u.bind(7001, ip, () => { if (++bound === hosts.length) console.log("ready"); });
}
`;

/** A test CA (ca.crt) and a certificate for `names` it signed (srv.key, srv.crt) in `dir`. */
function makeCerts(dir: string, names: string[]): void {
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  sh("openssl", ["req", "-x509", ...ec, "-keyout", join(dir, "ca.key"), "-out", join(dir, "ca.crt"), "-days", "2", "-subj", "/CN=sandboxd fake Internet test CA"]);
  sh("openssl", ["req", ...ec, "-keyout", join(dir, "srv.key"), "-out", join(dir, "srv.csr"), "-subj", `/CN=${names[0]}`]);
  writeFileSync(join(dir, "ext.cnf"), `subjectAltName=${names.map((n) => `DNS:${n}`).join(",")}\n`);
  sh("openssl", ["x509", "-req", "-in", join(dir, "srv.csr"), "-CA", join(dir, "ca.crt"), "-CAkey", join(dir, "ca.key"), "-CAcreateserial", "-out", join(dir, "srv.crt"), "-days", "2", "-extfile", join(dir, "ext.cnf")]);
}

/** A running fake Internet. */
export interface FakeInternet {
  /** The host end of the veth: pass it as --egress-interface. */
  iface: string;
  /** The fake hosts' addresses. */
  hosts: string[];
  /** The test resolver ("ADDR:53"): pass it as --dns-upstream. */
  resolver: string;
  /** PEM of the CA that signed the fake hosts' TLS certificate. */
  caPem: string;
  /** How many UDP datagrams the fake hosts received on 7001. */
  udpCount(): Promise<number>;
  /** The UDP datagrams received on 7001, each as "<address it was sent to> <payload>". */
  udpLog(): Promise<string[]>;
  /** Packets counted by the guard: forwarded from the sandboxes' range other than into the fake Internet, or to the fake hosts out of the uplink. */
  leaks(): number;
  /** Of those, the packets that left through the uplink (off this machine). */
  uplinkLeaks(): number;
  /** Packets from the sandboxes' range forwarded into the fake Internet (the guard's own check that it sees them). */
  forwarded(): number;
  /** The uplink the guard watches (the host's default route's interface). */
  uplink: string;
  stop(): void;
}

function sh(cmd: string, args: string[], input?: string): string {
  const r = spawnSync(cmd, args, { encoding: "utf8", input });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed: ${r.stderr}`);
  return r.stdout;
}

/**
 * Starts a fake Internet for sandboxd instances whose sandboxes live in `sandboxCidr`; `link` is a
 * /30 (x.y.z.0/30) for the veth; `nets` are the /28s of TEST-NET the fake hosts live in (.1 and .2
 * of each become hosts); `extraHosts` are more addresses served there (169.254.169.254, say), each
 * routed into the fake Internet by a host route of its own.
 */
export async function startFakeInternet(p: { tag: string; sandboxCidr: string; link: string; nets: string[]; zone: Record<string, string>; tlsNames: string[]; extraHosts?: string[] }): Promise<FakeInternet> {
  const ns = `sbfi${p.tag}`;
  const iface = `fih${p.tag}`;
  const peer = `fip${p.tag}`;
  const guard = `sbfiguard${p.tag}`;
  const [a, b, c] = p.link.split(".");
  const hostEnd = `${a}.${b}.${c}.1`;
  const peerEnd = `${a}.${b}.${c}.2`;
  const hosts = p.nets.flatMap((n) => {
    const [x, y, z, w] = n.split("/")[0].split(".");
    return [1, 2].map((k) => `${x}.${y}.${z}.${Number(w) + k}`);
  });
  // the resolver lives on the last address of the first /28
  const [rx, ry, rz, rw] = p.nets[0].split("/")[0].split(".");
  const resolverIp = `${rx}.${ry}.${rz}.${Number(rw) + 13}`;
  const extra = p.extraHosts ?? [];
  const uplink = (JSON.parse(sh("ip", ["-j", "-4", "route", "show", "default"]) || "[]") as { dev?: string }[])[0]?.dev ?? "eth0";
  const dir = mkdtempSync(join(tmpdir(), "sandboxd-fakenet-"));
  let server: ChildProcess | undefined;
  const clean = () => {
    server?.kill("SIGKILL");
    for (const n of [...p.nets, ...extra.map((h) => `${h}/32`)]) spawnSync("ip", ["route", "del", n, "via", peerEnd]);
    spawnSync("ip", ["link", "del", iface]);
    spawnSync("ip", ["netns", "del", ns]);
    spawnSync("nft", ["delete", "table", "inet", guard]);
  };
  const stop = () => {
    clean();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    clean();
    sh("ip", ["netns", "add", ns]);
    sh("ip", ["-batch", "-"], [
      `link add ${iface} type veth peer name ${peer} netns ${ns}`,
      `addr add ${hostEnd}/30 dev ${iface}`,
      `link set ${iface} up`,
      "",
    ].join("\n"));
    sh("ip", ["-n", ns, "-batch", "-"], [
      "link set lo up",
      `addr add ${peerEnd}/30 dev ${peer}`,
      `link set ${peer} up`,
      ...[...hosts, ...extra, resolverIp].map((h) => `addr add ${h}/32 dev lo`),
      "",
    ].join("\n"));
    for (const n of [...p.nets, ...extra.map((h) => `${h}/32`)]) sh("ip", ["route", "add", n, "via", peerEnd, "dev", iface]);
    sh("nft", ["-f", "-"], `table inet ${guard} {
  chain forward {
    type filter hook forward priority -10; policy accept;
    ip saddr ${p.sandboxCidr} oifname != "${iface}" counter
    ip saddr ${p.sandboxCidr} oifname "${iface}" counter comment "into"
  }
  chain postrouting {
    type filter hook postrouting priority -10; policy accept;
    oifname "${uplink}" ip daddr { ${p.nets.join(", ")} } counter log prefix "sbfi-uplink-daddr " comment "uplink"
    oifname "${uplink}" ip saddr ${p.sandboxCidr} counter log prefix "sbfi-uplink-saddr " comment "uplink"
  }
}
`);
    writeFileSync(join(dir, "server.cjs"), SERVER_JS);
    makeCerts(dir, p.tlsNames);
    server = spawn("ip", ["netns", "exec", ns, NODE, join(dir, "server.cjs"), dir, resolverIp, JSON.stringify(p.zone), ...hosts, ...extra], { stdio: ["ignore", "pipe", "inherit"] });
    await new Promise<void>((resolve, reject) => {
      server!.stdout!.once("data", () => resolve());
      server!.once("exit", (code) => reject(new Error(`fake Internet servers exited ${code}`)));
    });
  } catch (err) {
    stop();
    throw err;
  }
  return {
    iface,
    hosts,
    resolver: `${resolverIp}:53`,
    caPem: readFileSync(join(dir, "ca.crt"), "utf8"),
    uplink,
    udpCount: async () => Number(await (await fetch(`http://${hosts[0]}/udp-count`)).text()),
    udpLog: async () => (await (await fetch(`http://${hosts[0]}/udp-log`)).json()) as string[],
    leaks() {
      const out = sh("nft", ["list", "table", "inet", guard]);
      const lines = out.split("\n").filter((l) => !l.includes('comment "into"'));
      return lines.reduce((s, l) => s + Number(/counter packets (\d+)/.exec(l)?.[1] ?? 0), 0);
    },
    uplinkLeaks() {
      const out = sh("nft", ["list", "table", "inet", guard]);
      return [...out.matchAll(/counter packets (\d+) bytes \d+ comment "uplink"/g)].reduce((n, m) => n + Number(m[1]), 0);
    },
    forwarded() {
      const out = sh("nft", ["list", "table", "inet", guard]);
      return Number(/counter packets (\d+) bytes \d+ comment "into"/.exec(out)?.[1] ?? 0);
    },
    stop,
  };
}

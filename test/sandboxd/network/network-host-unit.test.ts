// The pure parts of the host-side network defences: DNS question parsing and REFUSED answers,
// Host header names, range overlap, and the host table's nft text (checked by nft without applying it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { overlaps } from "../../../src/sandboxd/network/claims.js";
import { questionName, refused } from "../../../src/sandboxd/network/dns-forwarder.js";
import { hostBaseScript, hostTableName, vethRemoveScript, vethScript } from "../../../src/sandboxd/network/host-table.js";
import { hostHeaderName } from "../../../src/sandboxd/network/http-egress.js";
import { egressPolicy } from "../../../src/sandboxd/network/policy.js";

/** A standard A query for `name` with ID 0x1234. */
function query(name: string): Buffer {
  const q = Buffer.concat([...name.split(".").map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)])), Buffer.from([0, 0, 1, 0, 1])]);
  return Buffer.concat([Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1]), q, Buffer.from([0, 0, 41, 4, 0, 0, 0, 0, 0, 0, 0])]);
}

test("questionName reads one standard question; anything else is no question", () => {
  const q = query("WWW.Example.com");
  assert.deepEqual(questionName(q), { name: "www.example.com", end: 12 + 17 + 4 });
  const answer = Buffer.from(q);
  answer[2] |= 0x80;
  assert.equal(questionName(answer), undefined, "a response is no query");
  const two = Buffer.from(q);
  two.writeUInt16BE(2, 4);
  assert.equal(questionName(two), undefined, "two questions");
  const pointer = Buffer.concat([q.subarray(0, 12), Buffer.from([0xc0, 12, 0, 1, 0, 1])]);
  assert.equal(questionName(pointer), undefined, "a compression pointer in the question");
  assert.equal(questionName(q.subarray(0, 20)), undefined, "cut short");
  assert.equal(questionName(Buffer.alloc(5)), undefined);
});

test("refused answers the question with REFUSED and no records", () => {
  const q = query("other.test");
  const r = refused(q, questionName(q)!.end);
  assert.equal(r.readUInt16BE(0), 0x1234);
  assert.equal(r[2] & 0x80, 0x80, "QR");
  assert.equal(r[2] & 0x01, 0x01, "RD as asked");
  assert.equal(r[3] & 0x0f, 5);
  assert.deepEqual([r.readUInt16BE(4), r.readUInt16BE(6), r.readUInt16BE(8), r.readUInt16BE(10)], [1, 0, 0, 0]);
  assert.equal(questionName(Buffer.concat([Buffer.from([r[0], r[1], 1, 0]), r.subarray(4)]))?.name, "other.test");
});

test("hostHeaderName strips the port, brackets and final dot", () => {
  assert.equal(hostHeaderName("Example.COM:8080"), "example.com");
  assert.equal(hostHeaderName("example.com."), "example.com");
  assert.equal(hostHeaderName("[::1]:80"), "::1");
  assert.equal(hostHeaderName(" "), undefined);
  assert.equal(hostHeaderName(undefined), undefined);
});

test("overlaps compares IPv4 networks", () => {
  assert.equal(overlaps("10.12.0.0/16", "10.12.200.0/24"), true);
  assert.equal(overlaps("198.19.240.128/25", "198.19.240.0/24"), true);
  assert.equal(overlaps("198.18.0.0/24", "198.18.1.0/24"), false);
  assert.equal(overlaps("198.18.0.5", "198.18.0.4/30"), true);
  assert.equal(overlaps("nonsense", "10.0.0.0/8"), false);
});

test("the host table's scripts are valid nft, and a veth's rules mirror its policy", () => {
  const table = hostTableName("unit000000");
  const served = { dnsPort: 5353, httpPort: 8080, tlsPort: 8443 };
  const policy = egressPolicy({ allowOut: ["example.com", "198.51.100.0/24"], denyOut: ["0.0.0.0/0"] });
  const base = hostBaseScript({ table, cidr: "198.19.250.0/24", served, blocked: ["10.0.0.0/8", "169.254.0.0/16"] });
  const veth = vethScript({ table, veth: "sbunit00000000", ip: "198.19.250.2", hostIp: "198.19.250.1", iface: "eth0", served, policy });
  const offline = vethScript({ table, veth: "sbunit00000001", ip: "198.19.250.6", hostIp: "198.19.250.5", served, policy: egressPolicy({ allowInternetAccess: false }) });
  for (const script of [base, base + veth, base + veth + offline + vethRemoveScript(table, "sbunit00000000")]) {
    const r = spawnSync("nft", ["-c", "-f", "-"], { input: script, encoding: "utf8" });
    assert.equal(r.status, 0, `${r.stderr}\n${script}`);
  }
  assert.match(veth, /ip saddr != 198\.19\.250\.2 drop/, "only its own source");
  assert.match(veth, /meta nfproto != ipv4 drop/, "no IPv6");
  assert.match(veth, /add element inet \S+ a_sbunit00000000 \{ 198\.51\.100\.0\/24 \}/);
  assert.match(veth, /tcp dport \{ 8080, 8443 \} accept/, "domains: the egress proxy");
  assert.match(offline, /add rule inet \S+ f_sbunit00000001 drop/, "no egress interface: nothing forwarded");
  assert.doesNotMatch(offline, /dport/, "offline: neither resolver nor proxy");
  assert.equal(spawnSync("nft", ["list", "table", "inet", table]).status, 1, "nft -c made nothing");
});

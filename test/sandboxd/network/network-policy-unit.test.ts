// The pure parts of the network policy: E2B's validation, what the firewall enforces, domain
// matching, and reading the name off a TLS ClientHello or an HTTP request head.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { connect } from "node:tls";
import { egressPolicy, egressRulesError, matchDomain, parseIpNet } from "../../../src/sandboxd/network/policy.js";
import { parseUpstream } from "../../../src/sandboxd/network/dns-forwarder.js";
import { peekHttpHost, peekSni } from "../../../src/sandboxd/network/sni.js";
import { sandboxRuleset } from "../../../src/sandboxd/network/firewall.js";

const DOMAINS = "When specifying allowed domains in allow out, you must include 'ALL_TRAFFIC' in deny out to block all other traffic.";

test("deny entries: IPs and CIDRs of both families; unspecified addresses only as 0.0.0.0/0", () => {
  for (const ok of ["1.2.3.4", "1.2.3.0/24", "0.0.0.0/0", "2001:db8::1", "2001:db8::/32", "255.255.255.255/32"]) assert.equal(egressRulesError([], [ok]), undefined, ok);
  for (const bad of ["0.0.0.0", "0.0.0.0/8", "::", "::/0", "1.2.3.4/33", "1.2.3", "example.com", "", " 1.2.3.4", "01.2.3.4", "1.2.3.4/", "1.2.3.4/x"]) {
    assert.equal(egressRulesError([], [bad]), `invalid denied CIDR ${bad}`, bad);
  }
});

test("allow entries: IPs and CIDRs are addresses, anything else a domain that needs ALL_TRAFFIC denied", () => {
  assert.equal(egressRulesError(["1.2.3.4", "10.0.0.0/8", "::1"], []), undefined);
  assert.equal(egressRulesError(["example.com"], []), DOMAINS);
  assert.equal(egressRulesError(["*.example.com"], ["1.2.3.4"]), DOMAINS);
  assert.equal(egressRulesError(["1.2.3.4/33"], []), DOMAINS, "not a CIDR, so a domain");
  assert.equal(egressRulesError(["example.com", "*", "*.x.y"], ["0.0.0.0/0"]), undefined);
  assert.equal(egressRulesError(["example.com"], ["bad"]), "invalid denied CIDR bad", "the deny list is checked first");
});

test("the enforced policy: IPv4 networks normalized and deduplicated, domains lower-cased, allow_internet_access false denies all", () => {
  assert.deepEqual(egressPolicy({ allowOut: ["1.2.3.4", "1.2.3.77/24", "1.2.3.0/24", "Example.COM", "2001:db8::/32"], denyOut: ["9.9.9.9"] }), {
    allow: ["1.2.3.4/32", "1.2.3.0/24"], deny: ["9.9.9.9/32"], domains: ["example.com"],
  });
  assert.deepEqual(egressPolicy({ allowOut: ["8.8.8.8"], denyOut: ["1.1.1.1"], allowInternetAccess: false }), { allow: ["8.8.8.8/32"], deny: ["0.0.0.0/0"], domains: [] });
  assert.deepEqual(egressPolicy({}), { allow: [], deny: [], domains: [] });
  assert.deepEqual(parseIpNet("10.0.0.0/8"), { family: 4, address: "10.0.0.0", prefix: 8, cidr: true });
});

test("domain matching as E2B's: exact (any case), * for all, *.x.y for subdomains only", () => {
  assert.ok(matchDomain("example.com", "EXAMPLE.com"));
  assert.ok(matchDomain("example.com", "example.com."));
  assert.ok(!matchDomain("example.com", "www.example.com"));
  assert.ok(matchDomain("*.example.com", "a.b.example.com"));
  assert.ok(!matchDomain("*.example.com", "example.com"));
  assert.ok(!matchDomain("*.example.com", "badexample.com"));
  assert.ok(matchDomain("*", "anything.test"));
  assert.ok(!matchDomain("ex*.com", "example.com"));
});

test("peekSni reads the server name of a real ClientHello; peekHttpHost the Host of a request head", async () => {
  const server = createServer();
  const first = new Promise<Buffer>((resolve) => server.once("connection", (c) => c.once("data", (d: Buffer) => (resolve(d), c.destroy()))));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const client = connect({ host: "127.0.0.1", port: (server.address() as { port: number }).port, servername: "Deep.Sub.Example.com" });
  client.on("error", () => undefined);
  const hello = await first;
  client.destroy();
  server.close();
  assert.deepEqual(peekSni(hello), { done: true, name: "Deep.Sub.Example.com" });
  assert.deepEqual(peekSni(hello.subarray(0, 20)), { done: false });
  assert.deepEqual(peekSni(Buffer.from("GET / HTTP/1.1\r\n")), { done: true, name: undefined });
  assert.deepEqual(peekHttpHost(Buffer.from("GET / HTTP/1.1\r\nHost: example.com:8080\r\n\r\n")), { done: true, name: "example.com" });
  assert.deepEqual(peekHttpHost(Buffer.from("GET / HTTP/1.1\r\nX: y\r\nhOsT:\tA.test\r\n\r\n")), { done: true, name: "A.test" });
  assert.deepEqual(peekHttpHost(Buffer.from("GET / HTTP/1.1\r\nHost: a.test\r\n")), { done: false });
  assert.deepEqual(peekHttpHost(Buffer.from("GET / HTTP/1.0\r\n\r\n")), { done: true, name: undefined });
});

test("--dns-upstream forms; the sandbox table sends DNS and, with domains only, 80/443 to sandboxd", () => {
  assert.deepEqual(parseUpstream("192.0.2.53"), { host: "192.0.2.53", port: 53 });
  assert.deepEqual(parseUpstream("192.0.2.53:5353"), { host: "192.0.2.53", port: 5353 });
  assert.deepEqual(parseUpstream("[2001:db8::53]:53"), { host: "2001:db8::53", port: 53 });
  assert.deepEqual(parseUpstream("2001:db8::53"), { host: "2001:db8::53", port: 53 });
  for (const bad of ["dns.example", "1.2.3.4:0", "1.2.3.4:99999", ""]) assert.throws(() => parseUpstream(bad), /--dns-upstream must be/, bad);
  const served = { dnsPort: 5300, httpPort: 8080, tlsPort: 8443 };
  const withDomains = sandboxRuleset({ hostIp: "10.12.0.1", egress: true, served, policy: egressPolicy({ allowOut: ["a.test"], denyOut: ["0.0.0.0/0"] }) });
  assert.match(withDomains, /udp dport 53 dnat ip to 10\.12\.0\.1:5300/);
  assert.match(withDomains, /tcp dport 443 dnat ip to 10\.12\.0\.1:8443/);
  const cidrOnly = sandboxRuleset({ hostIp: "10.12.0.1", egress: true, served, policy: egressPolicy({ allowOut: ["1.2.3.4"] }) });
  assert.match(cidrOnly, /udp dport 53 dnat/);
  assert.doesNotMatch(cidrOnly, /tcp dport 443 dnat/);
  const offline = sandboxRuleset({ hostIp: "10.12.0.1", egress: true, served, policy: egressPolicy({ allowInternetAccess: false }) });
  assert.doesNotMatch(offline, /dnat/, "no resolver when everything is denied and no domain allowed");
  assert.doesNotMatch(sandboxRuleset({ hostIp: "10.12.0.1", egress: false, served }), /dnat/, "no egress, no resolver");
});

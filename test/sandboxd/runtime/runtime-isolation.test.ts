// The runc runtime's isolation, end to end: a real sandbox from the cached base rootfs with the
// real envd, driven from the host through envd's process API.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import { spawnSync } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { SandboxAddress } from "../../../src/sandboxd/runtime/runtime.js";
import { MAPPED_ROOT } from "../../../src/sandboxd/host/idmap.js";
import { macOf } from "../../../src/sandboxd/network/veth.js";
import { cgroupDirsLike, health, leftovers, sh, skipReason, testRuntime, type TestRuntime } from "../helpers/runtime.js";

const skip = skipReason();

/** The host end's veth name, from the runtime's record of the sandbox. */
function vethOf(dataDir: string, id: string): string {
  return (JSON.parse(readFileSync(join(dataDir, "runtime", "sandboxes", `${id}.json`), "utf8")) as { hostVeth: string }).hostVeth;
}

/** The usable (non-tentative) IPv6 link-local address of a host interface, waiting for DAD; undefined without IPv6. */
async function hostLinkLocal(dev: string): Promise<string | undefined> {
  for (let i = 0; i < 40; i++) {
    const out = spawnSync("ip", ["-6", "-o", "addr", "show", "dev", dev, "scope", "link"], { encoding: "utf8" }).stdout ?? "";
    const m = /inet6 (fe80::[0-9a-f:]+)\/64/.exec(out);
    if (m && !/tentative/.test(out)) return m[1];
    if (!m && i > 10) return undefined;
    await new Promise((r) => setTimeout(r, 100));
  }
  return undefined;
}

describe("runc runtime: isolation", { skip }, () => {
  let t: TestRuntime;
  let sb: SandboxAddress;
  let id: string;

  before(async () => {
    t = await testRuntime(201);
    const spec = t.spec();
    id = spec.sandboxID;
    sb = await t.rt.create(spec);
  });
  after(async () => {
    await t?.cleanup();
  });

  test("envd answers /health from the host at the sandbox's own address", async () => {
    assert.match(sb.ip, /^198\.19\.201\.\d+$/);
    assert.equal(sb.envdPort, 49983);
    assert.equal(await health(sb.ip), 204);
  });

  test("the hostname is the sandbox ID; root is uid 0 inside; the default user has passwordless sudo", async () => {
    const r = await sh(sb.ip, "hostname; id -u; sudo -n -u root id -u", { user: "user" });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split("\n"), [id, "1000", "0"]);
    assert.doesNotMatch(r.stderr, /unable to resolve host/);
    const root = await sh(sb.ip, "id");
    assert.match(root.stdout, /^uid=0\(root\) gid=0\(root\)/);
  });

  test("files made inside belong to the mapped range on the host's upper layer", async () => {
    const r = await sh(sb.ip, "echo x > /root/by-root && su user -c 'echo y > /home/user/by-user'");
    assert.equal(r.exitCode, 0, r.stderr);
    const upper = join(t.dataDir, "sandboxes", id, "disk", "upper");
    assert.equal(statSync(join(upper, "root/by-root")).uid, MAPPED_ROOT);
    assert.equal(statSync(join(upper, "home/user/by-user")).uid, MAPPED_ROOT + 1000);
  });

  test("ps -e shows only the sandbox's own processes, with tini as PID 1", async () => {
    const r = await sh(sb.ip, "ps -e -o pid=,args=");
    assert.equal(r.exitCode, 0, r.stderr);
    const procs = r.stdout.trim().split("\n").map((l) => l.trim().split(/\s+/));
    assert.deepEqual(procs[0].slice(0, 2), ["1", "/usr/lib/sandboxd/tini"]);
    const programs = new Set(procs.map((p) => p[1]));
    for (const n of programs) assert.ok(["/usr/lib/sandboxd/tini", "/bin/sh", "/usr/lib/envd/envd", "ps"].includes(n), `unexpected process ${n} in ${r.stdout}`);
    assert.ok(procs.length < 8, r.stdout);
  });

  test("no CAP_NET_ADMIN: ip link add and nft fail, the firewall stays", async () => {
    const r = await sh(sb.ip, "ip link add dummy0 type dummy");
    assert.notEqual(r.exitCode, 0);
    assert.match(r.stderr, /Operation not permitted/);
    const flush = await sh(sb.ip, "ip addr flush dev eth0");
    assert.notEqual(flush.exitCode, 0);
  });

  test("each end of the veth knows the other's MAC from the start (permanent neighbours, no ARP), and root inside cannot change it", async () => {
    const hostEnd = sb.ip.replace(/\.(\d+)$/, (_, n: string) => `.${Number(n) - 1}`);
    const onHost = spawnSync("ip", ["neigh", "show", sb.ip, "dev", vethOf(t.dataDir, id)], { encoding: "utf8" }).stdout.trim();
    assert.equal(onHost, `${sb.ip} lladdr ${macOf(sb.ip)} PERMANENT`);
    const inside = await sh(sb.ip, `ip neigh show ${hostEnd} dev eth0; cat /sys/class/net/eth0/address`);
    assert.equal(inside.exitCode, 0, inside.stderr);
    assert.deepEqual(inside.stdout.trim().split("\n").map((l) => l.trim()), [`${hostEnd} lladdr ${macOf(hostEnd)} PERMANENT`, macOf(sb.ip)]);
    const change = await sh(sb.ip, `ip neigh replace ${hostEnd} lladdr 02:00:00:00:00:01 dev eth0 nud permanent`);
    assert.notEqual(change.exitCode, 0);
    assert.match(change.stderr, /Operation not permitted/);
  });

  test("no nested user namespace: unshare -U fails, even as the default user", async () => {
    for (const user of ["root", "user"]) {
      const r = await sh(sb.ip, "unshare -U -r true", { user });
      assert.notEqual(r.exitCode, 0, `unshare succeeded as ${user}`);
      assert.match(r.stderr, /Operation not permitted/);
    }
    const py = await sh(sb.ip, "python3 -c 'import os; os.unshare(os.CLONE_NEWUSER)'", { user: "user" });
    assert.notEqual(py.exitCode, 0);
    const mount = await sh(sb.ip, "mount -t tmpfs none /mnt");
    assert.notEqual(mount.exitCode, 0);
  });

  test("the sandbox cannot open connections to the host end or to the host's loopback", async () => {
    const hostEnd = sb.ip.replace(/\.(\d+)$/, (_, n: string) => `.${Number(n) - 1}`);
    const servers: Server[] = [];
    let accepted = 0;
    const listen = (host: string) =>
      new Promise<number>((resolve) => {
        const s = createServer((c) => {
          accepted++;
          c.destroy();
        });
        servers.push(s);
        s.listen(0, host, () => resolve((s.address() as { port: number }).port));
      });
    try {
      const pHost = await listen(hostEnd);
      const pLo = await listen("127.0.0.1");
      const probe = (host: string, port: number) =>
        sh(sb.ip, `timeout 3 bash -c 'exec 3<>/dev/tcp/${host}/${port}' && echo open || echo closed`);
      assert.equal((await probe(hostEnd, pHost)).stdout.trim(), "closed");
      assert.equal((await probe("127.0.0.1", pLo)).stdout.trim(), "closed");
      assert.equal((await probe("198.19.202.1", pHost)).stdout.trim(), "closed");
      // nor over IPv6 to the host end's link-local address (the veth has one when the host runs IPv6)
      const v6 = await hostLinkLocal(vethOf(t.dataDir, id));
      if (v6) {
        const p6 = await listen("::");
        const py = `import socket\ntry:\n    socket.create_connection(("${v6}%eth0", ${p6}), timeout=3); print("open")\nexcept OSError: print("closed")`;
        assert.equal((await sh(sb.ip, `python3 - <<'EOF'\n${py}\nEOF`)).stdout.trim(), "closed");
      }
      assert.equal(accepted, 0);
      // and the host can still dial the sandbox (what the proxy does)
      assert.equal(await health(sb.ip), 204);
    } finally {
      for (const s of servers) s.close();
    }
  });

  test("remove leaves no container, mount, veth, cgroup or files, and is idempotent", async () => {
    const before = leftovers(t.dataDir);
    assert.ok(before.some((l) => l.startsWith("veth")), `expected the sandbox's veth among ${before.join(", ")}`);
    assert.ok(cgroupDirsLike(id).length > 0);
    await t.rt.remove(id);
    assert.deepEqual(leftovers(t.dataDir), []);
    assert.deepEqual(cgroupDirsLike(id), []);
    assert.deepEqual(await t.rt.list(), []);
    await t.rt.remove(id);
    assert.notEqual(await health(sb.ip, 500), 204);
  });
});

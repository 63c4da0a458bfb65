// Network slots wired ahead, with the real runtime: a create takes one (its container joins the
// slot's user and network namespaces), gets the sandboxes' id mapping and its own policy, and
// leaves nothing behind; a killed instance's spares go with it and its slots are swept.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { instanceKey } from "../../../src/sandboxd/host/instance.js";
import { hostVethName } from "../../../src/sandboxd/network/veth.js";
import { createRuncRuntime } from "../../../src/sandboxd/runtime/runc.js";
import { health, leftovers, sh, skipReason, testRuntime, type TestRuntime } from "../helpers/runtime.js";

const skip = skipReason();

/** The spares' directories of a data dir (each holds its holder's FIFO and PID). */
function spareDirs(dataDir: string): string[] {
  const dir = join(dataDir, "runtime", "spares");
  return existsSync(dir) ? readdirSync(dir) : [];
}

/** The PIDs of the holders of a data dir's ready spares. */
function holderPids(dataDir: string): number[] {
  return spareDirs(dataDir).flatMap((d) => {
    try {
      return [Number(readFileSync(join(dataDir, "runtime", "spares", d, "pid"), "utf8"))];
    } catch {
      return [];
    }
  });
}

const alive = (pid: number) => existsSync(`/proc/${pid}`);

/** Waits (polling the data dir) until `n` spares are wired (each marks its directory ready). */
async function sparesReady(dataDir: string, n: number): Promise<void> {
  const ready = () => spareDirs(dataDir).filter((d) => existsSync(join(dataDir, "runtime", "spares", d, "ready"))).length >= n;
  // spares are wired niced: on a busy machine that takes a while
  for (let i = 0; i < 9000 && !ready(); i++) await new Promise((r) => setTimeout(r, 20));
  assert.ok(ready(), `${n} spare slots wired`);
}

/** The host end a sandbox's runtime record names. */
function vethOf(dataDir: string, id: string): string {
  return (JSON.parse(readFileSync(join(dataDir, "runtime", "sandboxes", `${id}.json`), "utf8")) as { hostVeth: string }).hostVeth;
}

describe("network slots wired ahead", { skip }, () => {
  let t: TestRuntime;

  before(async () => {
    // spares are asked for by the environment (the killed instance below inherits it)
    process.env.SANDBOXD_SPARE_SLOTS = "2";
    t = await testRuntime(209);
    await t.rt.list();
  });
  after(async () => {
    await t?.cleanup();
  });

  test("a create takes a spare: the container is in the spare's namespaces with the sandboxes' mapping, and the holder is gone", async () => {
    await t.rt.start?.();
    await sparesReady(t.dataDir, 2);
    const holders = holderPids(t.dataDir);
    const spec = t.spec();
    const sb = await t.rt.create(spec);
    const veth = vethOf(t.dataDir, spec.sandboxID);
    assert.notEqual(veth, hostVethName(instanceKey(t.dataDir), spec.sandboxID), "the host end is the spare's");
    assert.equal(await health(sb.ip), 204);
    const r = await sh(sb.ip, "cat /proc/self/uid_map /proc/self/gid_map; id -u; ip -o -4 addr show dev eth0");
    assert.match(r.stdout, /^\s+0\s+1879048192\s+65536\n\s+0\s+1879048192\s+65536\n0\n/);
    assert.match(r.stdout, new RegExp(`inet ${sb.ip.replace(/\./g, "\\.")}/30`));
    // one of the two holders let go once the container joined
    for (let i = 0; i < 500 && holders.every(alive); i++) await new Promise((res) => setTimeout(res, 10));
    assert.equal(holders.filter(alive).length, 1);
    // the isolation a sandbox of its own namespaces has: no CAP_NET_ADMIN, no nested user namespace
    assert.notEqual((await sh(sb.ip, "ip link add dummy0 type dummy")).exitCode, 0);
    assert.notEqual((await sh(sb.ip, "unshare -U true")).exitCode, 0);
    await t.rt.remove(spec.sandboxID);
    assert.equal(spawnSync("ip", ["link", "show", "dev", veth]).status, 1, "the spare's host end went with the sandbox");
    assert.deepEqual(leftovers(t.dataDir), []);
  });

  test("a create with its own rules on a spare gets them before it starts", async () => {
    await sparesReady(t.dataDir, 1);
    const spec = t.spec({ egress: { allow: ["8.8.8.8"], deny: ["0.0.0.0/0"], domains: [] } });
    const sb = await t.rt.create(spec);
    assert.notEqual(vethOf(t.dataDir, spec.sandboxID), hostVethName(instanceKey(t.dataDir), spec.sandboxID));
    const pid = readFileSync(join(t.dataDir, "sandboxes", spec.sandboxID, "pid"), "utf8").trim();
    const rules = spawnSync("nsenter", ["-t", pid, "-n", "nft", "list", "set", "inet", "sandboxd", "deny"], { encoding: "utf8" }).stdout;
    assert.match(rules, /0\.0\.0\.0\/0/);
    assert.equal(await health(sb.ip), 204);
    await t.rt.remove(spec.sandboxID);
    assert.deepEqual(leftovers(t.dataDir), []);
  });

  test("a killed instance's spares go with it, and a sweep frees their slots", async () => {
    // a data dir of its own: the killed instance's spares are then all its own
    const t2 = await testRuntime(210);
    try {
      const child = join(import.meta.dirname, "..", "helpers", "runtime-child.js");
      const spec = t2.spec();
      const proc = spawn(process.execPath, [child, t2.dataDir, t2.opts.envdDir, t2.networkCidr, spec.rootfs, spec.sandboxID], { stdio: ["ignore", "pipe", "ignore"] });
      const exited = new Promise((r) => proc.once("exit", r));
      await new Promise<void>((res) => proc.stdout!.on("data", (d: Buffer) => d.toString().includes("created") && res()));
      // the child wires its next spares once its create is over
      await sparesReady(t2.dataDir, 2);
      const holders = holderPids(t2.dataDir);
      proc.kill("SIGKILL");
      await exited;
      // the holders read end-of-file from the FIFOs only the killed process held open
      for (let i = 0; i < 500 && holders.some(alive); i++) await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(holders.filter(alive), []);
      await t2.rt.sweep(new Set());
      assert.deepEqual(await t2.rt.list(), []);
      assert.deepEqual(leftovers(t2.dataDir), []);
      assert.deepEqual(readdirSync(join(t2.dataDir, "runtime", "slots")).filter((f) => /^\d+$/.test(f)), [], "no slot is held");
      assert.deepEqual(spareDirs(t2.dataDir), []);
    } finally {
      await t2.cleanup();
    }
  });
});

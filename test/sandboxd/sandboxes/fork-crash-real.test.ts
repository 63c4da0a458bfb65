// A SIGKILL of a real sandboxd (real runc, loop-backed storage pool) while a fork of four is under
// way, caught once the forks' disk images are in the pool and a fork's runc container is made: after a restart on the same
// data dir nothing half-made remains (no row in a passing state, no disk image, loop device, runc
// container, cgroup, veth or mount of a fork that did not survive, no fork snapshot), the parent
// runs and answers a command, and a new fork of it works (with its own identity files, though the
// parent's, on the disk it copies, were edited and longer).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { instanceKey } from "../../../src/sandboxd/host/instance.js";
import { hostVethName } from "../../../src/sandboxd/network/veth.js";
import { api } from "../helpers/api-client.js";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/sdk-run.js";

/** Polls `cond` every 50 ms until it holds: an event awaited, bounded so a broken one ends the test. */
async function pollUntil(cond: () => boolean | Promise<boolean>, what: string, boundMs = 120_000): Promise<void> {
  for (const t0 = Date.now(); !(await cond()); ) {
    if (Date.now() - t0 > boundMs) throw new Error(`${what} did not happen within ${boundMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const ARGS = ["--storage-backing", "loop", "--storage-size-mb", "2048", "--warm-pool", "0"];
const ids = (dir: string) => (existsSync(dir) ? readdirSync(dir) : []).map((n) => n.replace(/\.img$/, "")).sort();

describe("a crash of sandboxd mid-fork on real runc", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let killed: Sandboxd | undefined;

  before(async () => {
    s = await startSandboxd({ args: ARGS });
  });
  after(async () => {
    await s?.stop();
    await killed?.stop();
  });

  test("SIGKILL while four forks start: after a restart no half-made fork is left, the parent answers, a new fork works", async (t) => {
    let ca = readFileSync(s.caFile);
    const made = await api(s, ca, "POST", "/v2/sandboxes", { body: { templateID: "base", timeout: 600 } });
    assert.equal(made.status, 201, made.body);
    const parent = made.json.sandboxID as string;
    await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.connect(${JSON.stringify(parent)});
      await sbx.files.write("/home/user/before.txt", "from the parent");
      console.log(JSON.stringify(true));
    `);
    const pool = join(s.dataDir, "storage");
    const db = new DatabaseSync(join(s.dataDir, "sandboxd.db"), { readOnly: true });
    const seen = new Set<string>();
    try {
      const pending = api(s, ca, "POST", `/sandboxes/${parent}/fork`, { body: { count: 4, timeout: 600 } }).catch((err: Error) => err);
      // the event: forks' disk images beside the parent's and a fork's runc container made (the
      // fork's copy is taken, its creates are at different steps)
      await pollUntil(() => {
        for (const r of db.prepare("SELECT id FROM sandboxes WHERE id != ?").all(parent) as { id: string }[]) seen.add(r.id);
        for (const id of ids(join(pool, "disks"))) if (id !== parent) seen.add(id);
        return ids(join(pool, "disks")).length >= 3 && ids(join(s.dataDir, "runc")).some((id) => id !== parent);
      }, "forks' disk images and a fork's container appearing");
      assert.equal(await s.terminate("SIGKILL"), null);
      await pending;
      for (const r of db.prepare("SELECT id FROM sandboxes WHERE id != ?").all(parent) as { id: string }[]) seen.add(r.id);
    } finally {
      db.close();
    }
    assert.ok(seen.size >= 2, `forks were under way at the kill: ${[...seen].join(", ")}`);

    killed = s;
    s = await startSandboxd({ dataDir: killed.dataDir, args: ARGS });
    ca = readFileSync(s.caFile);
    const check = new DatabaseSync(join(s.dataDir, "sandboxd.db"), { readOnly: true });
    let rows: { id: string; state: string; transition: string | null }[];
    try {
      rows = (check.prepare("SELECT id, state, transition FROM sandboxes").all() as typeof rows).map((r) => ({ ...r }));
    } finally {
      check.close();
    }
    for (const r of rows) assert.deepEqual({ state: r.state, transition: r.transition }, { state: "running", transition: null }, `sandbox ${r.id} is in a final state`);
    const kept = rows.map((r) => r.id).sort();
    assert.ok(kept.includes(parent), "the parent is kept");
    const listed = ((await api(s, ca, "GET", "/v2/sandboxes")).json as { sandboxID: string }[]).map((x) => x.sandboxID).sort();
    assert.deepEqual(listed, kept, "the API lists exactly the kept rows");
    const gone = [...seen].filter((id) => !kept.includes(id));
    t.diagnostic(`forks under way at the kill: ${seen.size}; sandboxes kept after the restart: ${kept.length} (the parent and forks that had finished)`);

    // host state: exactly the kept sandboxes' disks, loop devices, containers, cgroups, veths and mounts
    assert.deepEqual(ids(join(pool, "disks")), kept, "disk images: the kept sandboxes' only");
    assert.deepEqual(ids(join(pool, "snapshots")), [], "the fork's own snapshot is gone");
    assert.deepEqual(ids(join(pool, "tmp")), [], "no half-made copy");
    const loops = spawnSync("losetup", ["-n", "-l", "-O", "BACK-FILE"], { encoding: "utf8" }).stdout.split("\n").map((l) => l.trim()).filter((l) => l.startsWith(join(pool, "disks") + "/"));
    assert.deepEqual(loops.map((l) => l.slice(join(pool, "disks").length + 1).replace(/\.img( \(deleted\))?$/, "")).sort(), kept, "loop devices: the kept disks' only");
    const runcList = spawnSync("runc", ["--root", join(s.dataDir, "runc"), "list", "-q"], { encoding: "utf8" });
    assert.deepEqual(runcList.stdout.split("\n").filter(Boolean).sort(), kept, "runc containers: the kept sandboxes' only");
    const key = instanceKey(s.dataDir);
    // each hierarchy (one on cgroup v2, one per controller on v1) that has the instance's parent
    const parents = readdirSync("/sys/fs/cgroup").map((h) => join("/sys/fs/cgroup", h, `sandboxd-${key}`)).concat(join("/sys/fs/cgroup", `sandboxd-${key}`)).filter((d) => existsSync(d));
    assert.ok(parents.length > 0, "the instance's cgroup parent exists");
    for (const d of parents) assert.deepEqual(readdirSync(d, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort(), kept, `cgroups under ${d}: the kept sandboxes' only`);
    const links = spawnSync("ip", ["-o", "link", "show"], { encoding: "utf8" }).stdout;
    for (const id of gone) {
      assert.ok(!links.includes(hostVethName(key, id)), `no veth of the dropped fork ${id}`);
      assert.ok(!readFileSync("/proc/self/mountinfo", "utf8").includes(join(s.dataDir, "sandboxes", id)), `no mount of the dropped fork ${id}`);
      assert.ok(!existsSync(join(s.dataDir, "sandboxes", id)), `no directory of the dropped fork ${id}`);
    }

    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const parent = await Sandbox.connect(${JSON.stringify(parent)});
      const out = (await parent.commands.run("cat /home/user/before.txt")).stdout;
      // the parent's identity files, edited and longer than a fork's: each fork gets its own, whole and nothing more
      await parent.commands.run("echo '198.18.0.9 a-long-name-the-parent-added' | sudo tee -a /etc/hosts >/dev/null");
      const forks = await parent.fork({ count: 2 });
      const seen = [];
      for (const f of forks) {
        if (f instanceof Error) throw f;
        const hosts = (await f.commands.run("cat /etc/hosts")).stdout;
        const own = hosts.endsWith("\\t" + f.sandboxId + "\\n") && !hosts.includes("a-long-name") && (await f.commands.run("cat /etc/hostname")).stdout === f.sandboxId + "\\n";
        seen.push({ file: (await f.commands.run("cat /home/user/before.txt")).stdout, own });
        await f.kill();
      }
      console.log(JSON.stringify({ out, seen }));
    `);
    const fork = { file: "from the parent", own: true };
    assert.deepEqual(got, { out: "from the parent", seen: [fork, fork] }, "the parent answers and forks again; each fork has its own identity files");
    for (const id of kept) assert.equal((await api(s, ca, "DELETE", `/sandboxes/${id}`)).status, 204);
    assert.deepEqual(ids(join(pool, "disks")), [], "every disk goes with its sandbox");
    assert.deepEqual(ids(join(pool, "snapshots")), []);
  });
});

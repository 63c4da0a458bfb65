// The reconcile loop on a real sandboxd and real runc: a sandbox whose init is killed from the host
// leaves GET /v2/sandboxes at the loop's next pass (not at its timeout), and a SIGKILL of sandboxd
// while a snapshot is being copied (held there by freezing the storage pool's file system) leaves,
// after a restart on the same data dir, no snapshot listed or on disk and the sandbox usable. The
// same freeze holds a create from a snapshot in its copy: the SDK's deleteSnapshot is refused then;
// a template may not take a snapshot's name.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { api } from "../helpers/api-client.js";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/sdk-run.js";

/** Polls `cond` every 100 ms until it holds: an event awaited, bounded so a broken one ends the test. */
async function pollUntil(cond: () => boolean | Promise<boolean>, what: string, boundMs = 60_000): Promise<void> {
  for (const t0 = Date.now(); !(await cond()); ) {
    if (Date.now() - t0 > boundMs) throw new Error(`${what} did not happen within ${boundMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Whether `path` is a mount point (its own file system). */
function isMountPoint(path: string): boolean {
  return readFileSync("/proc/self/mountinfo", "utf8").split("\n").some((l) => l.split(" ")[4] === path);
}

const ARGS = ["--reconcile-interval-ms", "500", "--storage-backing", "loop", "--storage-size-mb", "2048", "--warm-pool", "0"];

describe("the reconcile loop on real runc", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  let killed: Sandboxd | undefined;

  before(async () => {
    s = await startSandboxd({ args: ARGS });
    ca = readFileSync(s.caFile);
  });
  after(async () => {
    await s?.stop();
    await killed?.stop();
  });

  const listed = async () => ((await api(s, ca, "GET", "/v2/sandboxes")).json as { sandboxID: string }[]).map((x) => x.sandboxID);
  const runc = (...args: string[]) => spawnSync("runc", ["--root", join(s.dataDir, "runc"), ...args], { encoding: "utf8" });

  test("a sandbox whose init is killed from the host leaves the list at the next pass, and its container is removed", async () => {
    const made = await api(s, ca, "POST", "/v2/sandboxes", { body: { templateID: "base", timeout: 3600 } });
    assert.equal(made.status, 201, made.body);
    const id = made.json.sandboxID as string;
    const other = await api(s, ca, "POST", "/v2/sandboxes", { body: { templateID: "base", timeout: 3600 } });
    assert.equal(other.status, 201, other.body);
    assert.deepEqual((await listed()).sort(), [id, other.json.sandboxID as string].sort());
    const kill = runc("kill", id, "KILL");
    assert.equal(kill.status, 0, kill.stderr);
    await pollUntil(async () => !(await listed()).includes(id), "the dead sandbox leaving GET /v2/sandboxes");
    assert.deepEqual(await listed(), [other.json.sandboxID]);
    assert.equal((await api(s, ca, "GET", `/sandboxes/${id}`)).status, 404);
    await pollUntil(() => runc("state", id).status !== 0, "its container being deleted");
    assert.match(s.logs(), new RegExp(`"sandboxID":"${id}".*processes are gone`));
    assert.equal((await api(s, ca, "DELETE", `/sandboxes/${other.json.sandboxID as string}`)).status, 204);
  });

  test("SIGKILL of sandboxd mid-snapshot: after a restart no snapshot is listed or on disk, and the sandbox runs on", async () => {
    const made = await api(s, ca, "POST", "/v2/sandboxes", { body: { templateID: "base", timeout: 600 } });
    assert.equal(made.status, 201, made.body);
    const id = made.json.sandboxID as string;
    const pool = join(s.dataDir, "storage");
    assert.ok(isMountPoint(pool), "the storage pool is its own loop-mounted file system");
    const snapshotFiles = () => readdirSync(join(pool, "snapshots")).length + readdirSync(join(pool, "tmp")).length;
    const db = new DatabaseSync(join(s.dataDir, "sandboxd.db"), { readOnly: true });
    const transition = () => (db.prepare("SELECT transition FROM sandboxes WHERE id = ?").get(id) as { transition: string | null } | undefined)?.transition;
    // the pool's writes block while it is frozen: the snapshot's copy cannot finish
    const freeze = spawnSync("fsfreeze", ["--freeze", pool], { encoding: "utf8" });
    assert.equal(freeze.status, 0, freeze.stderr);
    try {
      const pending = api(s, ca, "POST", `/sandboxes/${id}/snapshots`, { body: { name: "cut-short" } }).catch((err: Error) => err);
      await pollUntil(() => transition() === "snapshotting", "the store showing the snapshot under way");
      assert.equal(await s.terminate("SIGKILL"), null);
      await pending;
    } finally {
      spawnSync("fsfreeze", ["--unfreeze", pool]);
      db.close();
    }
    killed = s;
    s = await startSandboxd({ dataDir: killed.dataDir, args: ARGS });
    ca = readFileSync(s.caFile);
    const check = new DatabaseSync(join(s.dataDir, "sandboxd.db"), { readOnly: true });
    try {
      const r = check.prepare("SELECT state, transition, transition_image FROM sandboxes WHERE id = ?").get(id) as Record<string, unknown>;
      assert.deepEqual({ ...r }, { state: "running", transition: null, transition_image: null }, "back to running, nothing under way");
    } finally {
      check.close();
    }
    assert.deepEqual((await api(s, ca, "GET", "/snapshots")).json, [], "no snapshot is listed");
    assert.equal(snapshotFiles(), 0, "no snapshot image or half-made copy is left in the pool");
    assert.deepEqual(await listed(), [id]);
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.connect(${JSON.stringify(id)});
      await sbx.files.write("/home/user/after.txt", "usable");
      const snap = await sbx.createSnapshot({ name: "cut-short" });
      console.log(JSON.stringify({ out: (await sbx.commands.run("cat /home/user/after.txt")).stdout, snap: snap.snapshotId }));
    `);
    assert.deepEqual(got, { out: "usable", snap: "default/cut-short:default" }, "the sandbox runs, and the name can be taken");
    assert.equal((await api(s, ca, "DELETE", `/templates/${encodeURIComponent(got.snap)}`)).status, 204);
    assert.equal((await api(s, ca, "DELETE", `/sandboxes/${id}`)).status, 204);
    assert.equal(snapshotFiles(), 0);
  });

  test("the SDK's deleteSnapshot is refused (409, saying why) while a create from the snapshot is copying it, and succeeds after", async () => {
    const made = await api(s, ca, "POST", "/v2/sandboxes", { body: { templateID: "base", timeout: 600 } });
    assert.equal(made.status, 201, made.body);
    const parent = made.json.sandboxID as string;
    const snap = await api(s, ca, "POST", `/sandboxes/${parent}/snapshots`, { body: { name: "held" } });
    assert.equal(snap.status, 201, snap.body);
    // snapshots and templates share the team's names: a template may not take a snapshot's
    const clash = await api(s, ca, "POST", "/v3/templates", { body: { name: "held", cpuCount: 1, memoryMB: 256 } });
    assert.equal(clash.status, 409, clash.body);
    assert.equal(clash.json.message, "the name 'held' is a snapshot's; give the template another name, or delete the snapshot first");
    const pool = join(s.dataDir, "storage");
    assert.ok(isMountPoint(pool));
    const db = new DatabaseSync(join(s.dataDir, "sandboxd.db"), { readOnly: true });
    const starting = () => (db.prepare("SELECT count(*) AS n FROM sandboxes WHERE state = 'starting'").get() as { n: number }).n;
    let child: Promise<{ status: number; json: { sandboxID?: string } }> | undefined;
    const freeze = spawnSync("fsfreeze", ["--freeze", pool], { encoding: "utf8" });
    assert.equal(freeze.status, 0, freeze.stderr);
    let refused: string;
    try {
      child = api(s, ca, "POST", "/v2/sandboxes", { body: { templateID: "default/held:default", timeout: 60 } });
      await pollUntil(() => starting() === 1, "the create from the snapshot to be under way");
      refused = await runSdk(s, `
        import { Sandbox } from "e2b";
        console.log(JSON.stringify(await Sandbox.deleteSnapshot("default/held:default").then((r) => "deleted: " + r, (e) => e.constructor.name + ": " + e.message)));
      `);
    } finally {
      spawnSync("fsfreeze", ["--unfreeze", pool]);
      db.close();
    }
    assert.match(refused, /^SandboxError: 409: snapshot 'default\/held:default' is in use: a sandbox is being created from it; delete it once that is done$/);
    const created = await child;
    assert.equal(created.status, 201);
    const deleted = await runSdk(s, `
      import { Sandbox } from "e2b";
      console.log(JSON.stringify(await Sandbox.deleteSnapshot("default/held:default")));
    `);
    assert.equal(deleted, true, "deleted once the create is done; the sandbox made from it keeps its own disk");
    for (const id of [parent, created.json.sandboxID as string]) assert.equal((await api(s, ca, "DELETE", `/sandboxes/${id}`)).status, 204);
    assert.deepEqual(readdirSync(join(pool, "snapshots")), []);
  });
});

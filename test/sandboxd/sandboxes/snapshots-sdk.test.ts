// Snapshots, forks and pause to disk with the published SDK against a real sandboxd on real
// runc: a snapshot holds the files written before it, a create from it sees them (with its own
// variables), it is listed, paged, named again and deleted; a fork's sandboxes share the parent's
// past and none of each other's future; a sandbox paused to disk survives a SIGKILL of sandboxd
// and comes back cold on its own disk; quotas and bad input get the SDK's errors.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { api } from "../helpers/api-client.js";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/sdk-run.js";

/** Snapshots the test sandboxd lets its team keep. */
const MAX_SNAPSHOTS = 4;

describe("snapshots and forks through the published SDK", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  /** The instance a test killed: stopped last, as it owns the data dir its successor runs on. */
  let killed: Sandboxd | undefined;

  before(async () => {
    s = await startSandboxd({ args: ["--team-max-snapshots", String(MAX_SNAPSHOTS)] });
    ca = readFileSync(s.caFile);
  });
  after(async () => {
    await s?.stop();
    await killed?.stop();
  });

  /** The team's snapshot IDs, as GET /snapshots lists them. */
  const snapshotIDs = async () => ((await api(s, ca, "GET", "/snapshots")).json as { snapshotID: string }[]).map((x) => x.snapshotID);

  test("createSnapshot → listSnapshots (filters, pages) → Sandbox.create(snapshot) sees the files → named again → deleteSnapshot", async () => {
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const out = {};
      const sbx = await Sandbox.create({ timeoutMs: 120_000, envs: { FROM_PARENT: "p" } });
      out.parent = sbx.sandboxId;
      await sbx.files.write("/home/user/before.txt", "before");
      await sbx.commands.run("echo root-file > /opt/made-by-root", { user: "root" });
      const snap = await sbx.createSnapshot();
      const named = await sbx.createSnapshot({ name: "my-snap" });
      out.snap = snap;
      out.named = named;
      await sbx.files.write("/home/user/after.txt", "after");
      out.parentStill = (await sbx.commands.run("cat /home/user/before.txt /home/user/after.txt")).stdout;
      out.all = (await Sandbox.listSnapshots().nextItems()).map((x) => x.snapshotId);
      out.ofParent = (await sbx.listSnapshots().nextItems()).map((x) => x.snapshotId);
      out.ofOther = (await Sandbox.listSnapshots({ sandboxId: "inosuchsandbox" }).nextItems()).length;
      out.byName = (await Sandbox.listSnapshots({ name: "my-snap" }).nextItems()).map((x) => x.snapshotId);
      const pages = Sandbox.listSnapshots({ limit: 1 });
      out.page1 = (await pages.nextItems()).map((x) => x.snapshotId);
      out.more = pages.hasNext;
      out.page2 = (await pages.nextItems()).map((x) => x.snapshotId);
      out.end = pages.hasNext;

      const child = await Sandbox.create(snap.snapshotId, { timeoutMs: 60_000, envs: { OWN: "c" }, metadata: { from: "snapshot" } });
      out.childID = child.sandboxId;
      out.childFiles = (await child.commands.run("cat /home/user/before.txt; cat /opt/made-by-root; test -e /home/user/after.txt && echo after || echo no-after")).stdout;
      out.childEnv = (await child.commands.run("echo [$FROM_PARENT][$OWN] $E2B_SANDBOX_ID")).stdout;
      out.childUser = (await child.commands.run("whoami; touch /home/user/mine && echo writable")).stdout;
      out.childInfo = await child.getInfo().then((i) => [i.metadata.from, i.state]);

      // the name moves to a new copy; the sandbox it came from may go: snapshots outlive it
      await sbx.files.write("/home/user/before.txt", "rewritten");
      const renamed = await sbx.createSnapshot({ name: "my-snap" });
      out.renamedSame = renamed.snapshotId === named.snapshotId;
      await sbx.kill();
      const fromNamed = await Sandbox.create(named.snapshotId, { timeoutMs: 60_000 });
      out.namedFiles = (await fromNamed.commands.run("cat /home/user/before.txt /home/user/after.txt")).stdout;

      out.deleted = await Sandbox.deleteSnapshot(snap.snapshotId);
      out.deletedAgain = await Sandbox.deleteSnapshot(snap.snapshotId);
      out.childAfterDelete = (await child.commands.run("cat /home/user/before.txt")).stdout;
      out.createDeleted = await Sandbox.create(snap.snapshotId).then(() => "made", (e) => e.constructor.name + ": " + e.message);
      out.listAfter = (await Sandbox.listSnapshots().nextItems()).map((x) => x.snapshotId);
      out.deletedNamed = await Sandbox.deleteSnapshot(named.snapshotId);
      await child.kill();
      await fromNamed.kill();
      console.log(JSON.stringify(out));
    `);
    assert.match(got.snap.snapshotId, /^[a-z0-9]{20}:default$/);
    assert.deepEqual(got.snap.names, []);
    assert.equal(got.named.snapshotId, "default/my-snap:default");
    assert.deepEqual(got.named.names, ["default/my-snap:default"]);
    assert.equal(got.parentStill, "beforeafter", "the parent runs on after its snapshots");
    assert.deepEqual(new Set(got.all), new Set([got.snap.snapshotId, got.named.snapshotId]));
    assert.deepEqual(new Set(got.ofParent), new Set(got.all));
    assert.equal(got.ofOther, 0);
    assert.deepEqual(got.byName, [got.named.snapshotId]);
    assert.equal(got.page1.length, 1);
    assert.equal(got.more, true);
    assert.equal(got.page2.length, 1);
    assert.notEqual(got.page1[0], got.page2[0]);
    assert.equal(got.end, false);
    assert.equal(got.childFiles, "beforeroot-file\nno-after\n", "the snapshot holds what was written before it, nothing after");
    assert.equal(got.childEnv, `[][c] ${got.childID}\n`, "a sandbox from a snapshot has its create's variables, not the parent's");
    assert.equal(got.childUser, "user\nwritable\n");
    assert.deepEqual(got.childInfo, ["snapshot", "running"]);
    assert.equal(got.renamedSame, true, "taking a named snapshot again keeps its ID");
    assert.equal(got.namedFiles, "rewrittenafter", "the name points at the newest copy");
    assert.equal(got.deleted, true);
    assert.equal(got.deletedAgain, false);
    assert.equal(got.childAfterDelete, "before", "a sandbox made from a deleted snapshot keeps its own disk");
    assert.match(got.createDeleted, /^\w+Error: 404: .*not found/);
    assert.deepEqual(got.listAfter, [got.named.snapshotId]);
    assert.equal(got.deletedNamed, true);
    assert.deepEqual(await snapshotIDs(), []);
  });

  test("fork with count 3: every fork has the parent's files from before the fork, no one sees another's later writes, the parent runs on", async () => {
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const out = {};
      const parent = await Sandbox.create({ timeoutMs: 120_000, envs: { INHERITED: "yes" }, metadata: { role: "parent" } });
      await parent.files.write("/home/user/shared.txt", "from the parent");
      const forks = await parent.fork({ count: 3, timeoutMs: 60_000 });
      out.kinds = forks.map((f) => f instanceof Sandbox);
      out.ids = forks.map((f) => f.sandboxId);
      await parent.files.write("/home/user/parent-later.txt", "p");
      for (const [i, f] of forks.entries()) await f.files.write("/home/user/fork-" + i + ".txt", String(i));
      const ls = (sbx) => sbx.commands.run("ls /home/user | grep txt | tr '\\\\n' ' '").then((r) => r.stdout.trim());
      out.parentFiles = await ls(parent);
      out.forkFiles = await Promise.all(forks.map(ls));
      out.forkShared = await Promise.all(forks.map((f) => f.files.read("/home/user/shared.txt")));
      out.forkEnv = await Promise.all(forks.map((f) => f.commands.run("echo $INHERITED $E2B_SANDBOX_ID").then((r) => r.stdout.trim())));
      out.forkMeta = await Promise.all(forks.map((f) => f.getInfo().then((i) => i.metadata.role)));
      out.parentRunning = await parent.isRunning();
      out.snapshotsListed = (await Sandbox.listSnapshots().nextItems()).length;
      await parent.kill();
      out.forkAfterParent = (await forks[0].commands.run("cat /home/user/shared.txt")).stdout;
      for (const f of forks) await f.kill();
      console.log(JSON.stringify(out));
    `);
    assert.deepEqual(got.kinds, [true, true, true]);
    assert.equal(new Set(got.ids).size, 3);
    assert.equal(got.parentFiles, "parent-later.txt shared.txt");
    assert.deepEqual(got.forkFiles, ["fork-0.txt shared.txt", "fork-1.txt shared.txt", "fork-2.txt shared.txt"]);
    assert.deepEqual(got.forkShared, ["from the parent", "from the parent", "from the parent"]);
    assert.deepEqual(got.forkEnv, got.ids.map((id: string) => `yes ${id}`));
    assert.deepEqual(got.forkMeta, ["parent", "parent", "parent"]);
    assert.equal(got.parentRunning, true);
    assert.equal(got.snapshotsListed, 0, "a fork's snapshot is its own, never listed");
    assert.equal(got.forkAfterParent, "from the parent", "forks outlive their parent");
    assert.deepEqual(await snapshotIDs(), []);
  });

  test("pause to disk (pause keepMemory false, and onTimeout pause keepMemory false) survives SIGKILL of sandboxd; a frozen sandbox whose processes died comes back from disk", async () => {
    const made = await runSdk(s, `
      import { Sandbox } from "e2b";
      const out = {};
      const sbx = await Sandbox.create({ timeoutMs: 120_000, envs: { KEPT: "env" }, metadata: { keep: "meta" } });
      await sbx.files.write("/home/user/note.txt", "on disk");
      await sbx.commands.run("sleep 1000", { background: true });
      out.paused = await sbx.pause({ keepMemory: false });
      out.state = (await Sandbox.getInfo(sbx.sandboxId)).state;
      out.toDisk = sbx.sandboxId;
      const timed = await Sandbox.create({ timeoutMs: 3_000, lifecycle: { onTimeout: { action: "pause", keepMemory: false } } });
      await timed.files.write("/home/user/timed.txt", "timed out");
      for (let i = 0; i < 600 && (await Sandbox.getInfo(timed.sandboxId)).state !== "paused"; i++) await new Promise((r) => setTimeout(r, 100));
      out.timed = timed.sandboxId;
      out.timedState = (await Sandbox.getInfo(timed.sandboxId)).state;
      const frozen = await Sandbox.create({ timeoutMs: 120_000 });
      await frozen.files.write("/home/user/frozen.txt", "was frozen");
      await frozen.pause();
      out.frozen = frozen.sandboxId;
      console.log(JSON.stringify(out));
    `);
    assert.deepEqual([made.paused, made.state, made.timedState], [true, "paused", "paused"]);
    // sandboxd dies; the frozen sandbox's processes die too (as on a host reboot)
    assert.equal(await s.terminate("SIGKILL"), null);
    spawnSync("runc", ["--root", join(s.dataDir, "runc"), "delete", "--force", made.frozen]);
    killed = s;
    s = await startSandboxd({ dataDir: killed.dataDir, args: ["--team-max-snapshots", String(MAX_SNAPSHOTS)] });
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const out = {};
      out.listed = (await Sandbox.list({ query: { state: ["paused"] } }).nextItems()).map((x) => x.sandboxId).sort();
      const sbx = await Sandbox.connect(${JSON.stringify(made.toDisk)});
      out.note = (await sbx.commands.run("cat /home/user/note.txt; echo; echo $KEPT; pgrep -x sleep || echo no-sleep")).stdout;
      out.meta = (await sbx.getInfo()).metadata.keep;
      out.sameID = sbx.sandboxId;
      const timed = await Sandbox.connect(${JSON.stringify(made.timed)}, { timeoutMs: 60_000 });
      out.timed = await timed.files.read("/home/user/timed.txt");
      const frozen = await Sandbox.connect(${JSON.stringify(made.frozen)}, { timeoutMs: 60_000 });
      out.frozen = await frozen.files.read("/home/user/frozen.txt");
      for (const x of [sbx, timed, frozen]) await x.kill();
      console.log(JSON.stringify(out));
    `);
    assert.deepEqual(got.listed, [made.toDisk, made.timed, made.frozen].sort(), "all three are paused after the restart");
    assert.equal(got.note, "on disk\nenv\nno-sleep\n", "files and the create's variables are kept; processes are not");
    assert.equal(got.meta, "meta");
    assert.equal(got.sameID, made.toDisk);
    assert.equal(got.timed, "timed out");
    assert.equal(got.frozen, "was frozen");
  });

  test("bad input and quotas: unknown sandbox or snapshot 404, bad count or name 400, past the team's quota 429", async () => {
    const made = await api(s, ca, "POST", "/v2/sandboxes", { body: { templateID: "base", timeout: 120 } });
    assert.equal(made.status, 201, made.body);
    const id = made.json.sandboxID as string;
    try {
      const cases: [string, string, unknown, number, RegExp][] = [
        ["POST", "/sandboxes/inosuchsandbox00000000/fork", { count: 1 }, 404, /doesn't exist/],
        ["POST", "/sandboxes/inosuchsandbox00000000/snapshots", {}, 404, /doesn't exist/],
        ["POST", `/sandboxes/${id}/fork`, { count: 0 }, 400, /"count": number must be between 1 and 20/],
        ["POST", `/sandboxes/${id}/fork`, { count: 21 }, 400, /"count": number must be between 1 and 20/],
        ["POST", `/sandboxes/${id}/fork`, { count: "3" }, 400, /"count" must be an integer/],
        ["POST", `/sandboxes/${id}/fork`, { count: 1, extra: 1 }, 400, /"extra" is not supported/],
        ["POST", `/sandboxes/${id}/snapshots`, { name: "Bad Name!" }, 400, /invalid name/],
        ["POST", `/sandboxes/${id}/snapshots`, { name: 7 }, 400, /"name" must be a string/],
        ["POST", `/sandboxes/${id}/snapshots`, { name: "base" }, 409, /is a template's/],
        ["GET", "/snapshots?limit=0", undefined, 400, /"limit"/],
        ["GET", "/snapshots?nextToken=bm9wZQ", undefined, 400, /Invalid next token/],
        ["DELETE", "/templates/nosuchsnapshot0000000%3Adefault", undefined, 404, /not found/],
        ["POST", "/v2/sandboxes", { templateID: "nosuchsnapshot0000000:default" }, 404, /not found/],
      ];
      for (const [method, path, body, status, message] of cases) {
        const r = await api(s, ca, method, path, { body });
        assert.equal(r.status, status, `${method} ${path} ${JSON.stringify(body)} → ${r.body}`);
        assert.match(r.json.message, message, `${method} ${path}`);
      }
      const taken: string[] = [];
      for (let i = 0; i < MAX_SNAPSHOTS; i++) {
        const r = await api(s, ca, "POST", `/sandboxes/${id}/snapshots`, { body: {} });
        assert.equal(r.status, 201, r.body);
        taken.push(r.json.snapshotID);
      }
      const over = await api(s, ca, "POST", `/sandboxes/${id}/snapshots`, { body: {} });
      assert.equal(over.status, 429, over.body);
      assert.match(over.json.message, new RegExp(`maximum number of snapshots \\(${MAX_SNAPSHOTS}\\)`));
      const sdk = await runSdk(s, `
        import { Sandbox } from "e2b";
        console.log(JSON.stringify(await Sandbox.createSnapshot(${JSON.stringify(id)}).then(() => "made", (e) => e.constructor.name)));
      `);
      assert.equal(sdk, "RateLimitError");
      for (const snap of taken) assert.equal((await api(s, ca, "DELETE", `/templates/${encodeURIComponent(snap)}`)).status, 204);
      assert.equal((await api(s, ca, "POST", `/sandboxes/${id}/snapshots`, { body: {} })).status, 201, "deleting frees the quota");
      const [left] = await snapshotIDs();
      assert.equal((await api(s, ca, "DELETE", `/snapshots/${encodeURIComponent(left)}`)).status, 204);
    } finally {
      await api(s, ca, "DELETE", `/sandboxes/${id}`);
    }
    assert.deepEqual(await snapshotIDs(), []);
  });
});

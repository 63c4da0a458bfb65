import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { existingCgroupDirs } from "../../../src/sandboxd/host/cgroups.js";
import { api } from "../helpers/api-client.js";
import { call, startSandboxd, waitWarmPool, warmPoolReady, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/sdk-run.js";

const RUNC = spawnSync("runc", ["--version"]).status === 0;

/** The containers runc holds for a sandboxd (created ones and pooled ones alike). */
function containers(s: Sandboxd): { id: string; pid: number; status: string }[] {
  const r = spawnSync("runc", ["--root", join(s.dataDir, "runc"), "list", "--format", "json"], { encoding: "utf8" });
  return (JSON.parse(r.stdout.trim() || "null") as { id: string; pid: number; status: string }[] | null) ?? [];
}

/** The cgroup parent of a sandboxd's sandboxes (named by a hash of its data dir, as the runtime names it). */
const cgroupParent = (s: Sandboxd) => `sandboxd-${createHash("sha256").update(resolve(s.dataDir)).digest("hex").slice(0, 10)}`;

/** A sandbox's cpu.shares (cgroup v1) or cpu.weight (v2), read where the runtime puts its cgroup; NaN when it has none. */
function cpuShare(s: Sandboxd, id: string): number {
  for (const dir of existingCgroupDirs(`/${cgroupParent(s)}/${id}`)) {
    for (const f of ["cpu.shares", "cpu.weight"]) {
      if (existsSync(join(dir, f))) return Number(readFileSync(join(dir, f), "utf8"));
    }
  }
  return NaN;
}

/** The sandbox's nft table, listed inside its network namespace. */
function table(s: Sandboxd, id: string): string {
  const pid = containers(s).find((c) => c.id === id)?.pid;
  assert.ok(pid, `no container ${id}`);
  return spawnSync("nsenter", ["-t", String(pid), "-n", "nft", "list", "table", "inet", "sandboxd"], { encoding: "utf8" }).stdout;
}

async function creates(s: Sandboxd): Promise<{ pool: number; cold: number }> {
  const r = await call(s.port, readFileSync(s.caFile), "api.e2b.localhost", "/metrics", { headers: { "x-api-key": s.apiKey } });
  const n = (from: string) => Number(new RegExp(`^sandboxd_creates_total\\{from="${from}"\\} (\\d+)$`, "m").exec(r.body)?.[1]);
  return { pool: n("pool"), cold: n("cold") };
}

describe("the warm pool of a real sandboxd", { skip: RUNC ? false : "runc is not installed" }, () => {
  let s: Sandboxd;
  let ca: Buffer;

  before(async () => {
    s = await startSandboxd({ args: ["--warm-pool", "2"] });
    ca = readFileSync(s.caFile);
    await waitWarmPool(s, 2);
  });
  after(async () => {
    await s?.stop();
  });

  test("pooled sandboxes are nobody's: not listed, not routed, on a background CPU share", async () => {
    const pooled = containers(s);
    assert.equal(pooled.length, 2);
    assert.deepEqual((await api(s, ca, "GET", "/v2/sandboxes?state=running,paused")).json, []);
    for (const c of pooled) {
      assert.equal(c.status, "running");
      assert.equal((await api(s, ca, "GET", `/sandboxes/${c.id}`)).status, 404);
      const proxied = await call(s.port, ca, `49983-${c.id}.e2b.localhost`, "/health");
      assert.equal(proxied.status, 502, "the proxy does not route to a pooled sandbox");
      assert.equal(cpuShare(s, c.id), 256, `cgroup dirs of ${c.id}: ${JSON.stringify(existingCgroupDirs(`/${cgroupParent(s)}/${c.id}`))}`);
    }
  });

  test("a create claims one: its ID, the create's variables, metadata, access token, network rules and CPU share", async () => {
    const pooled = new Set(containers(s).map((c) => c.id));
    const before = await creates(s);
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.create({ timeoutMs: 60_000, secure: true, allowInternetAccess: false, metadata: { from: "pool" }, envs: { FOO: "bar" } });
      const out = { id: sbx.sandboxId };
      out.env = (await sbx.commands.run("echo $FOO $E2B_SANDBOX_ID; hostname; whoami; pwd")).stdout;
      out.listed = (await Sandbox.list({ query: { metadata: { from: "pool" } } }).nextItems()).map((x) => x.sandboxId);
      out.tokenless = (await fetch("https://" + sbx.getHost(49983) + "/files?path=/etc/hostname")).status;
      console.log(JSON.stringify(out));
    `);
    assert.ok(pooled.has(got.id), `${got.id} was not one of the pooled sandboxes ${[...pooled].join(", ")}`);
    assert.equal(got.env, `bar ${got.id}\n${got.id}\nuser\n/home/user\n`);
    assert.deepEqual(got.listed, [got.id]);
    assert.equal(got.tokenless, 401, "a secure sandbox from the pool refuses requests without its access token");
    assert.match(table(s, got.id), /set deny \{[^}]*elements = \{ 0\.0\.0\.0\/0 \}/s, "the create's deny-all rule replaced the pool's open rules");
    for (const other of pooled) if (other !== got.id) assert.doesNotMatch(table(s, other), /0\.0\.0\.0\/0/, "pooled sandboxes keep the open rules");
    assert.equal(cpuShare(s, got.id), 2048, "the claimed sandbox has the CPU share of its 2 vCPUs");
    const after = await creates(s);
    assert.equal(after.pool, before.pool + 1);
    assert.equal(after.cold, before.cold);
    await waitWarmPool(s, 2);
    assert.equal((await api(s, ca, "DELETE", `/sandboxes/${got.id}`)).status, 204);
  });

  test("a pooled sandbox that died is not handed out: the create starts one cold and succeeds", async () => {
    const pooled = containers(s).map((c) => c.id);
    for (const id of pooled) spawnSync("runc", ["--root", join(s.dataDir, "runc"), "delete", "--force", id]);
    const before = await creates(s);
    const made = await api(s, ca, "POST", "/sandboxes", { body: { templateID: "base", timeout: 60 } });
    assert.equal(made.status, 201, made.body);
    const id = made.json.sandboxID as string;
    const ran = await runSdk(s, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.connect(${JSON.stringify(id)});
      console.log(JSON.stringify((await sbx.commands.run("echo alive")).stdout));
    `);
    assert.equal(ran, "alive\n");
    assert.match(s.logs(), /a pooled sandbox could not be claimed; starting one cold/);
    assert.equal((await creates(s)).pool, before.pool + 1, "counted as a claim of the pool");
    // the other dead one is found by the pool's check (every 5 s) and replaced: two live pooled ones beside the created one
    for (let i = 0; i < 200 && containers(s).length < 3; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(containers(s).length, 3, JSON.stringify(containers(s)));
    await waitWarmPool(s, 2);
    assert.deepEqual(containers(s).filter((c) => pooled.includes(c.id)).map((c) => c.id), [id], "only the created sandbox (cold-started under the claimed ID) is left of them");
    assert.equal((await api(s, ca, "DELETE", `/sandboxes/${id}`)).status, 204);
  });

  test("SIGKILL with a full pool, then a start without a pool: the pooled sandboxes are removed, nothing is left", async () => {
    await waitWarmPool(s, 2);
    assert.equal(await s.terminate("SIGKILL"), null);
    const leftover = containers(s).map((c) => c.id);
    assert.ok(leftover.length >= 2, `the pooled containers outlive a SIGKILL: ${JSON.stringify(containers(s))}\n${s.logs().slice(-3000)}`);
    const first = s;
    s = await startSandboxd({ dataDir: first.dataDir });
    try {
      assert.deepEqual(containers(s), [], `${new Date().toISOString()}\n${first.logs().slice(-2500)}\n${s.logs().slice(-2500)}`);
      for (const id of leftover) assert.ok(Number.isNaN(cpuShare(s, id)), `the cgroup of ${id} is removed`);
      assert.equal(await warmPoolReady(s), 0);
    } finally {
      await s.stop();
      s = first;
    }
  });

  test("SIGTERM removes the pool's sandboxes (created ones stay)", async () => {
    const other = await startSandboxd({ args: ["--warm-pool", "1"] });
    const ca = readFileSync(other.caFile);
    try {
      await waitWarmPool(other, 1);
      const made = await api(other, ca, "POST", "/sandboxes", { body: { templateID: "base", timeout: 60 } });
      assert.equal(made.status, 201, made.body);
      await waitWarmPool(other, 1);
      assert.equal(containers(other).length, 2);
      assert.equal(await other.terminate("SIGTERM"), 0);
      assert.deepEqual(containers(other).map((c) => c.id), [made.json.sandboxID]);
    } finally {
      await other.stop();
    }
  });
});

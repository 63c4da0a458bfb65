import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAPPED_ROOT } from "../../../src/sandboxd/host/idmap.js";
import { runSdk } from "../helpers/sdk-run.js";
import { NODE, ROOT, sandboxSkipReason, startSandboxd, waitWarmPool, warmPoolReady, type Sandboxd } from "../helpers/sandboxd.js";

const skip = sandboxSkipReason();


/** Prelude of the SDK scripts: `attempt` creates and reports a refusal's class and message instead of throwing. */
const PRELUDE = `
import { Sandbox, RateLimitError } from "e2b";
const attempt = async (opts = {}) => {
  try {
    const s = await Sandbox.create("base", opts);
    return { created: s.sandboxId, sandbox: s };
  } catch (e) {
    return { name: e.name, rateLimit: e instanceof RateLimitError, message: e.message };
  }
};
const shown = (r) => (r.sandbox ? { created: r.created } : r);
`;

const mode = (path: string) => statSync(path).mode & 0o777;

/** Runs `cmd` as uid/gid 65534 with no supplementary groups (a local user who is neither root nor a sandbox). */
function asNobody(cmd: string[]): { status: number | null; stderr: string } {
  const r = spawnSync("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", ...cmd], { encoding: "utf8" });
  return { status: r.status, stderr: r.stderr };
}

/** Runs openssl in `cwd`; its exit status and output. */
function openssl(args: string[], cwd: string): { status: number | null; out: string } {
  const r = spawnSync("openssl", args, { cwd, encoding: "utf8" });
  return { status: r.status, out: r.stdout + r.stderr };
}

describe("host budget: memory admission, paused sandboxes, per-team quotas", { skip }, () => {
  let s: Sandboxd;
  let blueKey = "";
  before(async () => {
    s = await startSandboxd({ args: ["--memory-budget-mb", "1536", "--team-memory-mb", "1024"] });
    const made = spawnSync(NODE, [join(ROOT, "dist", "sandboxd"), "keys", "create", "--team", "blue", "--data-dir", s.dataDir], { encoding: "utf8" });
    assert.equal(made.status, 0, made.stderr);
    blueKey = /^E2B_API_KEY=(e2b_[0-9a-f]{40})$/m.exec(made.stdout)?.[1] ?? "";
    assert.ok(blueKey);
  });
  after(async () => {
    await s?.stop();
  });

  test("creates past the team quota and past the host budget get 429 (RateLimitError) naming memory; a paused sandbox still counts; a kill makes room", async () => {
    const out = await runSdk(s, `
      const out = {};
      const a = await Sandbox.create("base");
      const b = await Sandbox.create("base");
      const third = await attempt();
      out.overTeam = shown(third);
      const blue = await Sandbox.create("base", { apiKey: ${JSON.stringify(blueKey)} });
      const blue2 = await attempt({ apiKey: ${JSON.stringify(blueKey)} });
      out.overHost = shown(blue2);
      out.paused = await b.pause();
      const afterPause = await attempt();
      out.afterPause = shown(afterPause);
      await a.kill();
      const afterKill = await attempt();
      out.afterKill = shown(afterKill);
      for (const r of [third, blue2, afterPause, afterKill]) if (r.sandbox) await r.sandbox.kill();
      await Promise.all([b.kill(), blue.kill()]);
      console.log(JSON.stringify(out));
    `, { prelude: PRELUDE });
    assert.equal(out.overTeam.rateLimit, true, JSON.stringify(out));
    assert.match(out.overTeam.message, /maximum memory for concurrent E2B sandboxes \(the team's quota: 1024 of 1024 MiB in use, this sandbox needs 512 MiB/);
    assert.equal(out.overHost.rateLimit, true, JSON.stringify(out));
    assert.match(out.overHost.message, /maximum memory for concurrent E2B sandboxes \(this host's sandbox budget: 1536 of 1536 MiB in use/);
    assert.equal(out.paused, true);
    assert.equal(out.afterPause.rateLimit, true, "a paused sandbox keeps its memory reserved: " + JSON.stringify(out));
    assert.match(out.afterKill.created ?? "", /^i[a-z0-9]{20}$/, JSON.stringify(out));
  });
});

describe("host budget: the warm pool never takes the last of it", { skip }, () => {
  let s: Sandboxd;
  before(async () => {
    s = await startSandboxd({ args: ["--memory-budget-mb", "1024", "--warm-pool", "2"] });
  });
  after(async () => {
    await s?.stop();
  });

  test("a pool of 2 on a budget of two sandboxes keeps one, so two creates succeed; the third is 429 and the pool does not refill into the budget", async () => {
    await waitWarmPool(s, 1);
    const out = await runSdk(s, `
      const a = await attempt();
      const b = await attempt();
      const c = await attempt();
      console.log(JSON.stringify({ a: shown(a), b: shown(b), c: shown(c), ids: [a, b, c].filter((r) => r.sandbox).map((r) => r.created) }));
    `, { prelude: PRELUDE });
    assert.match(out.a.created ?? "", /^i/, JSON.stringify(out));
    assert.match(out.b.created ?? "", /^i/, JSON.stringify(out));
    assert.equal(out.c.rateLimit, true, JSON.stringify(out));
    assert.match(out.c.message, /maximum memory/);
    assert.equal(await warmPoolReady(s), 0);
    const killed = await runSdk(s, `
      await Sandbox.kill(${JSON.stringify(out.ids[0])});
      const d = await attempt();
      console.log(JSON.stringify({ d: shown(d) }));
    `, { prelude: PRELUDE });
    assert.match(killed.d.created ?? "", /^i/, JSON.stringify(killed));
  });
});

describe("host hygiene: disk budget, file modes, the CA's name constraint, the key shown once, the start sweep, memoryMB bound", { skip }, () => {
  const dataDir = mkdtempSync(join(tmpdir(), "sandboxd-budget-"));
  let s: Sandboxd | undefined;
  after(async () => {
    await s?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("the data dir is 0710 (group: sandbox root), the store, its WAL, the API key and the TLS keys 0600; another local user reads none of them", async () => {
    s = await startSandboxd({ dataDir, args: ["--disk-budget-mb", "15360"] });
    const st = statSync(dataDir);
    assert.equal(mode(dataDir), 0o710);
    assert.equal(st.uid, 0);
    assert.equal(st.gid, MAPPED_ROOT);
    for (const f of ["sandboxd.db", "sandboxd.db-wal", "sandboxd.db-shm", "api-key", "tls/ca.key", "tls/server.key"]) {
      assert.ok(existsSync(join(dataDir, f)), f);
      assert.equal(mode(join(dataDir, f)), 0o600, f);
    }
    assert.equal(mode(join(dataDir, "tls")), 0o700);
    for (const f of ["sandboxd.db", "api-key"]) {
      const r = asNobody(["cat", join(dataDir, f)]);
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /Permission denied/);
    }
    assert.notEqual(asNobody(["ls", dataDir]).status, 0);
  });

  test("a second sandbox past the disk budget (each base sandbox reserves its 10 GiB disk) gets 429 naming disk", async () => {
    const out = await runSdk(s!, `
      const a = await attempt();
      const b = await attempt();
      for (const r of [a, b]) if (r.sandbox) await r.sandbox.kill();
      console.log(JSON.stringify({ a: shown(a), b: shown(b) }));
    `, { prelude: PRELUDE });
    assert.match(out.a.created ?? "", /^i/, JSON.stringify(out));
    assert.equal(out.b.rateLimit, true, JSON.stringify(out));
    assert.match(out.b.message, /maximum disk for concurrent E2B sandboxes \(this host's sandbox budget: 10240 of 15360 MiB in use, this sandbox needs 10240 MiB/);
  });

  test("the CA is constrained to the domain: a certificate its key signs for evil.example fails verification, one for a sandbox name passes", () => {
    const tls = join(dataDir, "tls");
    const text = openssl(["x509", "-in", join(tls, "ca.crt"), "-noout", "-text"], tls).out;
    assert.match(text, /X509v3 Name Constraints: critical\s+Permitted:\s+DNS:e2b\.localhost\s/);
    const work = mkdtempSync(join(tmpdir(), "sandboxd-ca-"));
    try {
      for (const name of ["evil.example", "49983-x.e2b.localhost"]) {
        assert.equal(openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`], work).status, 0);
        writeFileSync(join(work, `${name}.ext`), `subjectAltName=DNS:${name}\n`);
        const signed = openssl(["x509", "-req", "-in", `${name}.csr`, "-CA", join(tls, "ca.crt"), "-CAkey", join(tls, "ca.key"), "-days", "2", "-extfile", `${name}.ext`, "-out", `${name}.crt`], work);
        assert.equal(signed.status, 0, signed.out);
      }
      const evil = openssl(["verify", "-CAfile", join(tls, "ca.crt"), "evil.example.crt"], work);
      assert.notEqual(evil.status, 0);
      assert.match(evil.out, /permitted subtree violation/);
      const good = openssl(["verify", "-CAfile", join(tls, "ca.crt"), "49983-x.e2b.localhost.crt"], work);
      assert.equal(good.status, 0, good.out);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  test("a restart: the key is not printed, an unconstrained CA is replaced, crash leftovers are swept, a template above --max-sandbox-memory-mb is refused", async () => {
    const key = s!.apiKey;
    assert.equal(await s!.terminate(), 0);
    const tls = join(dataDir, "tls");
    // An unconstrained CA, as every CA made before the constraint was.
    assert.equal(openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "30", "-subj", "/CN=old", "-addext", "basicConstraints=critical,CA:TRUE"], tls).status, 0);
    const old = readFileSync(join(tls, "ca.crt"));
    // What a crash leaves: a half-written key file, TLS scratch dirs with private keys, stray sandbox dirs.
    writeFileSync(join(dataDir, "api-key.tmp-424242"), "e2b_half");
    for (const d of [".ca-424242", ".server-424242"]) {
      mkdirSync(join(tls, d));
      writeFileSync(join(tls, d, "key"), "secret");
    }
    mkdirSync(join(dataDir, "sandboxes", "iorphan00000000000000", "disk"), { recursive: true });
    mkdirSync(join(dataDir, "sandboxes", ".Half-made.tmp"));
    s = await startSandboxd({ dataDir, args: ["--max-sandbox-memory-mb", "256"] });
    assert.equal(s.apiKey, key);
    assert.equal(s.logs().includes(key), false, "a later start does not print the key");
    assert.match(s.logs(), /^# E2B_API_KEY: the key is in .*api-key \(readable by root only/m);
    assert.notDeepEqual(readFileSync(join(tls, "ca.crt")), old);
    assert.match(openssl(["x509", "-in", join(tls, "ca.crt"), "-noout", "-text"], tls).out, /Permitted:\s+DNS:e2b\.localhost\s/);
    assert.match(s.logs(), /replaced the local certificate authority with one constrained to the domain/);
    for (const p of ["api-key.tmp-424242", "tls/.ca-424242", "tls/.server-424242", "sandboxes/iorphan00000000000000", "sandboxes/.Half-made.tmp"]) {
      assert.equal(existsSync(join(dataDir, p)), false, `${p} was swept`);
    }
    const out = await runSdk(s, `
      const r = await attempt();
      if (r.sandbox) await r.sandbox.kill();
      console.log(JSON.stringify(shown(r)));
    `, { prelude: PRELUDE });
    // The SDK reports a 400 of create as a SandboxError whose message starts with the status.
    assert.equal(out.rateLimit, false, JSON.stringify(out));
    assert.match(out.message, /^400: Template 'base' asks for 512 MiB of memory; this server allows at most 256 MiB per sandbox \(--max-sandbox-memory-mb\)/);
  });
});

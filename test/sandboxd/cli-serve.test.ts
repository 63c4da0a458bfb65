import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { Agent, get as httpsGet } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { call, NODE, ROOT, startSandboxd, type Sandboxd } from "./helpers/sandboxd.js";

/** Runs `node dist/sandboxd <args>` to completion. */
function sandboxd(args: string[], env: NodeJS.ProcessEnv = {}) {
  return spawnSync(NODE, [join(ROOT, "dist", "sandboxd"), ...args], { encoding: "utf8", env: { ...process.env, ...env }, timeout: 30_000 });
}

const mode = (path: string) => statSync(path).mode & 0o777;

describe("sandboxd serve: flags", () => {
  test("--help lists every flag with its environment variable and exits 0", () => {
    const r = sandboxd(["--help"]);
    assert.equal(r.status, 0);
    for (const flag of ["domain", "listen", "data-dir", "log-level", "envd-dir", "network-cidr", "egress-interface", "warm-pool", "spare-slots"]) {
      assert.match(r.stdout, new RegExp(`--${flag}\\b`), flag);
      assert.match(r.stdout, new RegExp(`SANDBOXD_${flag.toUpperCase().replace(/-/g, "_")}\\b`), flag);
    }
  });

  test("bad flags and values get a clear message on stderr and exit 2", () => {
    const cases: [string[], RegExp][] = [
      [["serve", "--bogus"], /Unknown option '--bogus'/],
      [[], /no command given/],
      [["start"], /unknown command 'start'/],
      [["serve", "--listen", "1.2.3"], /--listen must be ADDR:PORT/],
      [["serve", "--listen", "127.0.0.1:99999"], /--listen must be ADDR:PORT/],
      [["serve", "--domain", "localhost"], /--domain must be a DNS name of at least two labels/],
      [["serve", "--domain", "bad_name.x"], /--domain must be/],
      [["serve", "--log-level", "loud"], /--log-level must be one of/],
      [["serve", "--network-cidr", "10.12.0.0/31"], /--network-cidr must be an IPv4 CIDR/],
      [["serve", "--egress-interface", "eth0; rm -rf /"], /--egress-interface must be an interface name or none/],
      [["serve", "--domain"], /argument missing|requires an argument/i],
      [["serve", "--warm-pool", "some"], /--warm-pool must be a whole number from 0 to 32/],
      [["serve", "--warm-pool", "33"], /--warm-pool must be a whole number from 0 to 32, got '33'/],
      [["serve", "--spare-slots", "17"], /--spare-slots must be a whole number from 0 to 16, got '17'/],
      [["serve", "--spare-slots=-1"], /--spare-slots must be a whole number from 0 to 16/],
    ];
    for (const [args, message] of cases) {
      const r = sandboxd(args);
      assert.equal(r.status, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.match(r.stderr, message, args.join(" "));
      assert.equal(r.stdout, "", args.join(" "));
    }
  });

  test("environment variables stand in for flags, and flags win over them", () => {
    const r = sandboxd(["serve"], { SANDBOXD_LOG_LEVEL: "loud" });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /got 'loud'/);
    const flagWins = sandboxd(["serve", "--listen", "bad"], { SANDBOXD_LISTEN: "127.0.0.1:1" });
    assert.match(flagWins.stderr, /got 'bad'/);
  });
});

describe("sandboxd serve: first start, TLS, restart", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "sandboxd-cli-"));
  chmodSync(dataDir, 0o755);
  let first: Sandboxd | undefined;
  after(async () => {
    await first?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("first start makes the CA, the server key and the API key with tight modes, and prints the three lines", async () => {
    first = await startSandboxd({ dataDir, wait: "lines" });
    assert.equal(first.sdkEnv.E2B_DOMAIN, `e2b.localhost:${first.port}`);
    assert.match(first.sdkEnv.E2B_API_KEY, /^e2b_[0-9a-f]{40}$/);
    assert.equal(first.sdkEnv.NODE_EXTRA_CA_CERTS, join(dataDir, "tls", "ca.crt"));
    assert.match(first.logs(), /libnss-myhostname/);
    assert.equal(mode(join(dataDir, "tls", "ca.crt")), 0o644);
    assert.equal(mode(join(dataDir, "tls", "ca.key")), 0o600);
    assert.equal(mode(join(dataDir, "tls", "server.key")), 0o600);
    assert.equal(mode(join(dataDir, "api-key")), 0o600);
    assert.equal(readFileSync(join(dataDir, "api-key"), "utf8").trim(), first.sdkEnv.E2B_API_KEY);
    // The key is the user's to copy, never a log line.
    assert.equal(first.logs().split("--- stderr")[1].includes(first.sdkEnv.E2B_API_KEY), false);
  });

  test("a client trusting ca.crt (as NODE_EXTRA_CA_CERTS does) reaches api.<domain> by name; one that does not is refused", async () => {
    const s = first!;
    const ca = readFileSync(s.caFile);
    const fetchHealth = (withCa: boolean) =>
      new Promise<number>((resolve, reject) => {
        httpsGet(`https://api.e2b.localhost:${s.port}/health`, { ca: withCa ? ca : undefined, agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        }).on("error", reject);
      });
    assert.ok([200, 503].includes(await fetchHealth(true)));
    await assert.rejects(fetchHealth(false), (err: NodeJS.ErrnoException) => err.code === "SELF_SIGNED_CERT_IN_CHAIN" || err.code === "UNABLE_TO_VERIFY_LEAF_SIGNATURE");
    const health = await call(s.port, ca, "api.e2b.localhost", "/health");
    const body = JSON.parse(health.body) as { status?: string; code?: number };
    assert.ok(health.status === 200 ? body.status === "ok" : body.code === 503, health.body);
  });

  test("SIGTERM exits 0 at once even with an idle keep-alive connection open; a restart on the same data dir keeps the CA, the server certificate and the API key", async () => {
    const s = first!;
    const ca = readFileSync(s.caFile);
    const agent = new Agent({ keepAlive: true, ca });
    await new Promise<void>((resolve, reject) => {
      httpsGet({ host: "127.0.0.1", port: s.port, path: "/health", servername: "api.e2b.localhost", headers: { host: "api.e2b.localhost" }, agent }, (res) => {
        res.resume();
        res.on("end", () => resolve());
      }).on("error", reject);
    });
    const t0 = Date.now();
    const code = await s.terminate("SIGTERM");
    agent.destroy();
    assert.equal(code, 0);
    assert.ok(Date.now() - t0 < 2000, `exit took ${Date.now() - t0} ms (the idle connection held it for the grace period)`);
    const cert = readFileSync(join(dataDir, "tls", "server.crt"));
    first = await startSandboxd({ dataDir, wait: "lines" });
    assert.equal(first.sdkEnv.E2B_API_KEY, s.sdkEnv.E2B_API_KEY);
    // The key was shown when it was made; this start says where it is instead.
    assert.equal(first.logs().includes(s.sdkEnv.E2B_API_KEY), false);
    assert.match(first.logs(), new RegExp(`^# E2B_API_KEY: the key is in ${join(dataDir, "api-key")} \\(readable by root only`, "m"));
    assert.deepEqual(readFileSync(first.caFile), ca);
    assert.deepEqual(readFileSync(join(dataDir, "tls", "server.crt")), cert);
    const health = await call(first.port, ca, "api.e2b.localhost", "/health");
    assert.ok([200, 503].includes(health.status));
  });

  test("a restart with another domain replaces the CA (it is constrained to its domain) and the server certificate", async () => {
    const s = first!;
    const ca = readFileSync(s.caFile);
    assert.equal(await s.terminate("SIGTERM"), 0);
    first = await startSandboxd({ dataDir, wait: "lines", args: ["--domain", "sbx.localhost"] });
    assert.equal(first.sdkEnv.E2B_DOMAIN, `sbx.localhost:${first.port}`);
    const next = readFileSync(first.caFile);
    assert.notDeepEqual(next, ca);
    assert.match(first.logs(), /replaced the local certificate authority with one constrained to the domain/);
    const health = await call(first.port, next, "api.sbx.localhost", "/health");
    assert.ok([200, 503].includes(health.status));
    await assert.rejects(call(first.port, ca, "api.sbx.localhost", "/health"));
  });

  test("a lost api-key file is replaced by a new key on the next start (the store keeps only hashes)", async () => {
    const s = first!;
    assert.equal(await s.terminate("SIGTERM"), 0);
    rmSync(join(dataDir, "api-key"));
    first = await startSandboxd({ dataDir, wait: "lines" });
    assert.match(first.sdkEnv.E2B_API_KEY, /^e2b_[0-9a-f]{40}$/);
    assert.notEqual(first.sdkEnv.E2B_API_KEY, s.sdkEnv.E2B_API_KEY);
    assert.equal(mode(join(dataDir, "api-key")), 0o600);
    assert.equal(readFileSync(join(dataDir, "api-key"), "utf8").trim(), first.sdkEnv.E2B_API_KEY);
  });
});

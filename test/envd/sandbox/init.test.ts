import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { clients } from "../helpers/clients.js";
import { Filesystem } from "../../../src/envd/gen/filesystem/filesystem_pb.js";
import { Process } from "../../../src/envd/gen/process/process_pb.js";

const init = (d: Daemon, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${d.url}/init`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });

test("/init sets the token, refuses unauthorised rotation and reset; the gate follows", async () => {
  const d = await startDaemon();
  try {
    const open = await fetch(`${d.url}/envs`);
    assert.equal(open.status, 200, "no token set: everything is open");

    const r1 = await init(d, { accessToken: "tok-1" });
    assert.equal(r1.status, 204);
    assert.match(r1.headers.get("x-envd-version") ?? "", /^\d+\.\d+\.\d+/);
    const denied = await fetch(`${d.url}/envs`);
    assert.equal(denied.status, 401);
    assert.deepEqual(await denied.json(), {
      code: 401,
      message: "unauthorized access, please provide a valid access token or method signing if supported",
    });
    assert.equal((await fetch(`${d.url}/envs`, { headers: { "x-access-token": "tok-1" } })).status, 200);

    // Rotation needs the current token (no host hash configured).
    const wrong = await init(d, { accessToken: "tok-2" });
    assert.equal(wrong.status, 401);
    assert.equal(await wrong.text(), "access token validation failed");
    const reset = await init(d, {});
    assert.equal(reset.status, 401);
    assert.equal(await reset.text(), "access token reset not authorized");
    assert.equal((await init(d, { accessToken: "tok-1" })).status, 204, "same token re-init is fine");
    assert.equal((await fetch(`${d.url}/envs`, { headers: { "x-access-token": "tok-1" } })).status, 200);
  } finally {
    await d.stop();
  }
});

test("/init token authorisation through the host-provided SHA-512 hash", async () => {
  const hash = createHash("sha512").update("host-token").digest("hex");
  const d = await startDaemon({ args: ["--access-token-hash", hash] });
  try {
    assert.equal((await init(d, { accessToken: "other" })).status, 401, "first set must match the hash when one exists");
    assert.equal((await init(d, { accessToken: "host-token" })).status, 204);
    assert.equal((await fetch(`${d.url}/metrics`)).status, 401);
    assert.equal((await fetch(`${d.url}/metrics`, { headers: { "x-access-token": "host-token" } })).status, 200);
    // Without a token in the request and a non-empty-string hash, the reset is not authorised.
    assert.equal((await init(d, {})).status, 401);
  } finally {
    await d.stop();
  }
  // A hash file the host rewrites: set a token, then authorise a reset with the hash of "".
  const hashFile = join(tmpdir(), `envd-token-hash-${process.pid}`);
  const d3 = await startDaemon({ args: ["--access-token-hash-file", hashFile] });
  try {
    writeFileSync(hashFile, hash + "\n");
    assert.equal((await init(d3, { accessToken: "host-token" })).status, 204);
    assert.equal((await fetch(`${d3.url}/envs`)).status, 401);
    assert.equal((await init(d3, {})).status, 401, "reset needs the host's consent");
    writeFileSync(hashFile, createHash("sha512").update("").digest("hex"));
    assert.equal((await init(d3, {})).status, 204, "hash of the empty string authorises a reset");
    assert.equal((await fetch(`${d3.url}/envs`)).status, 200, "token cleared: open again");
  } finally {
    await d3.stop();
    rmSync(hashFile, { force: true });
  }
});

test("every gated route and RPC × {no token, wrong token, right token}; exempt routes stay open", async () => {
  const d = await startDaemon();
  try {
    assert.equal((await init(d, { accessToken: "secret" })).status, 204);
    const gated: [string, string, string?, string?][] = [
      ["GET", "/envs"],
      ["GET", "/metrics"],
      ["POST", "/files/compose", "application/json", "{}"],
      ["POST", "/filesystem.Filesystem/Stat", "application/json", '{"path":"/"}'],
      ["POST", "/filesystem.Filesystem/ListDir", "application/json", '{"path":"/tmp"}'],
      ["POST", "/process.Process/List", "application/json", "{}"],
      ["POST", "/process.Process/SendSignal", "application/json", '{"process":{"pid":1},"signal":"SIGNAL_SIGTERM"}'],
    ];
    for (const [method, path, ct, body] of gated) {
      const h = (tok?: string) => ({ ...(ct ? { "content-type": ct } : {}), ...(tok ? { "x-access-token": tok } : {}) });
      assert.equal((await fetch(d.url + path, { method, headers: h(), body })).status, 401, `${path} without token`);
      assert.equal((await fetch(d.url + path, { method, headers: h("nope"), body })).status, 401, `${path} wrong token`);
      const ok = await fetch(d.url + path, { method, headers: h("secret"), body });
      assert.notEqual(ok.status, 401, `${path} right token`);
    }
    // Every RPC of both services, whatever its kind, is behind the gate.
    for (const svc of [Filesystem, Process]) {
      for (const m of svc.methods) {
        const streaming = m.methodKind !== "unary";
        const body = streaming ? Buffer.concat([Buffer.from([0, 0, 0, 0, 2]), Buffer.from("{}")]) : "{}";
        const ct = streaming ? "application/connect+json" : "application/json";
        for (const tok of [undefined, "nope", "secret"]) {
          const headers: Record<string, string> = { "content-type": ct, ...(tok ? { "x-access-token": tok } : {}) };
          const r = await fetch(`${d.url}/${svc.typeName}/${m.name}`, { method: "POST", headers, body });
          if (tok === "secret") assert.notEqual(r.status, 401, `${svc.typeName}/${m.name} with the token`);
          else assert.equal(r.status, 401, `${svc.typeName}/${m.name} token ${tok}`);
          await r.body?.cancel();
        }
      }
    }
    assert.equal((await fetch(`${d.url}/health`)).status, 204);
    // /files is exempt from the header gate: it answers its own signature error, not the gate's.
    const files = await fetch(`${d.url}/files?path=/etc/hostname`);
    assert.equal(files.status, 401);
    assert.notEqual((await files.json()).message, "unauthorized access, please provide a valid access token or method signing if supported");
    // RPC clients with the header.
    const c = clients(d.url);
    const st = await c.fs.binary.stat({ path: "/" }, { headers: { "x-access-token": "secret" } });
    assert.equal(st.entry?.path, "/");
    await assert.rejects(c.fs.grpc.stat({ path: "/" }), /unauthenticated|401|Unauthenticated/i);
  } finally {
    await d.stop();
  }
});

test("/init envVars replace the user set; /envs reflects it; defaults are applied", async () => {
  const d = await startDaemon();
  try {
    assert.equal((await init(d, { envVars: { A: "1", B: "2", E2B_SANDBOX: "hijack" } })).status, 204);
    let envs = await (await fetch(`${d.url}/envs`)).json();
    assert.equal(envs.A, "1");
    assert.equal(envs.B, "2");
    assert.equal(envs.E2B_SANDBOX, "true", "internal variables cannot be overwritten");
    assert.equal((await init(d, { envVars: { B: "3" } })).status, 204);
    envs = await (await fetch(`${d.url}/envs`)).json();
    assert.equal(envs.A, undefined, "replace, not merge");
    assert.equal(envs.B, "3");
    assert.equal((await init(d, { defaultUser: "root", defaultWorkdir: "/tmp" })).status, 204);
    const c = clients(d.url);
    assert.equal((await c.fs.json.stat({ path: "" })).entry?.path, "/tmp");
    assert.equal((await c.fs.json.stat({ path: "." })).entry?.path, "/root", "relative paths resolve under the new default user's home");
    assert.equal((await init(d, { defaultUser: "", defaultWorkdir: "" })).status, 204);
    assert.equal((await c.fs.json.stat({ path: "" })).entry?.path, "/tmp", "empty strings do not clear defaults");
  } finally {
    await d.stop();
  }
});

test("/init timestamp: ordering guard and clock step on a fake clock", async () => {
  const clockFile = join(tmpdir(), `envd-clock-${process.pid}`);
  const d = await startDaemon({ args: ["--clock", `file:${clockFile}`] });
  try {
    const host = Date.UTC(2030, 0, 1, 12, 0, 0);
    writeFileSync(clockFile, `${BigInt(host - 60_000) * 1_000_000n}\n`); // sandbox 1 min behind
    assert.equal((await init(d, { timestamp: new Date(host).toISOString(), envVars: { V: "new" } })).status, 204);
    assert.equal(readFileSync(clockFile, "utf8").trim(), `${BigInt(host) * 1_000_000n}`, "clock stepped to the host time");
    // Within tolerance (sandbox 10 ms behind): no step.
    writeFileSync(clockFile, `${BigInt(host + 1000 - 10) * 1_000_000n}\n`);
    assert.equal((await init(d, { timestamp: new Date(host + 1000).toISOString() })).status, 204);
    assert.equal(readFileSync(clockFile, "utf8").trim(), `${BigInt(host + 1000 - 10) * 1_000_000n}`);
    // A stale timestamp is ignored but still answered 204.
    const stale = await init(d, { timestamp: new Date(host - 5000).toISOString(), envVars: { V: "stale" } });
    assert.equal(stale.status, 204);
    assert.equal((await (await fetch(`${d.url}/envs`)).json()).V, "new");
    // Nanosecond precision survives: an equal timestamp re-applies.
    assert.equal((await init(d, { timestamp: "2030-01-01T12:00:01.000000001Z", envVars: { V: "ns" } })).status, 204);
    assert.equal((await init(d, { timestamp: "2030-01-01T12:00:01.000000001Z", envVars: { V: "again" } })).status, 204);
    assert.equal((await (await fetch(`${d.url}/envs`)).json()).V, "again");
  } finally {
    await d.stop();
    rmSync(clockFile, { force: true });
  }
});

test("/init rejects malformed bodies with 400 and still reports the version", async () => {
  const d = await startDaemon();
  try {
    for (const body of ["{", "[]", '{"accessToken":""}', '{"accessToken":"a\\u0041"}', '{"timestamp":"yesterday"}', '{"envVars":{"A":1}}']) {
      const r = await init(d, body);
      assert.equal(r.status, 400, body);
      assert.ok(r.headers.get("x-envd-version"), body);
    }
    assert.equal((await init(d, "")).status, 204, "empty body = {}");
  } finally {
    await d.stop();
  }
});

test("/init installs a CA bundle into the configured store and replaces its previous one", async () => {
  const d = await startDaemon();
  try {
    const bundle = join(d.scratch, "ca-bundle.crt");
    writeFileSync(bundle, "SYSTEM-CERT\n");
    const pemA = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----";
    const pemB = "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n\n";
    assert.equal((await init(d, { caBundle: pemA })).status, 204);
    assert.equal(readFileSync(bundle, "utf8"), `SYSTEM-CERT\n${pemA}\n`);
    assert.equal((await init(d, { caBundle: pemA })).status, 204);
    assert.equal(readFileSync(bundle, "utf8"), `SYSTEM-CERT\n${pemA}\n`, "same PEM twice is a no-op");
    assert.equal((await init(d, { caBundle: pemB })).status, 204);
    assert.equal(readFileSync(bundle, "utf8"), `SYSTEM-CERT\n${pemB.trimEnd()}\n`, "old PEM removed, new appended");
    assert.equal(readFileSync(join(d.scratch, "e2b-ca.crt"), "utf8"), `${pemB.trimEnd()}\n`);
  } finally {
    await d.stop();
  }
});

test("/init hyperloopIP maps events.e2b.local in the configured hosts file", async () => {
  const d = await startDaemon();
  try {
    const hosts = join(d.scratch, "hosts");
    writeFileSync(hosts, "# comment\n127.0.0.1 localhost\n10.0.0.9 events.e2b.local\n");
    assert.equal((await init(d, { hyperloopIP: "192.0.2.7" })).status, 204);
    let text = "";
    for (let i = 0; i < 50 && !text.includes("192.0.2.7"); i++) {
      await new Promise((r) => setTimeout(r, 20));
      text = readFileSync(hosts, "utf8");
    }
    assert.equal(text, "# comment\n127.0.0.1 localhost\n192.0.2.7        events.e2b.local\n");
    const envs = await (await fetch(`${d.url}/envs`)).json();
    assert.equal(envs.E2B_EVENTS_ADDRESS, "http://192.0.2.7");
  } finally {
    await d.stop();
  }
});

// Registries that are hard to pull from, all on loopback: TLS from a CA the test makes (trusted
// through --registry-certs-dir), credentials from --registry-auth-file, wrong credentials, an
// unknown tag, a registry that stops sending mid-layer, one that corrupts a layer or serves
// another manifest than the digest named, one that never answers, one that answers garbage. Each
// failure is a build error naming the image (never a password) that leaves no half-made pull,
// blob or layer in the data dir.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, request, type Server } from "node:http";
import { createServer, type Socket, type Server as NetServer } from "node:net";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cachedBaseRootfs } from "../../../src/sandboxd/images/base.js";
import { fixtureLayout } from "../helpers/oci-fixtures.js";
import { push, registrySkipReason, startRegistry, type Registry } from "../helpers/registry.js";
import { runSdk as runSdkIn } from "../helpers/sdk-run.js";
import { ROOT, sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";

const CACHE_DIR = process.env.SANDBOXD_CACHE_DIR ?? "/var/cache/sandboxd";
const PRIVATE = { user: "puller", password: "tls-registry-pw-8c1f" };
const FILE_WRONG = "auth-file-wrong-pw-41d9";
const SDK_WRONG = "sdk-wrong-pw-77ae";
/** --registry-timeout of the sandboxd under test, seconds. */
const TIMEOUT_S = 5;

/** A loopback TCP server; `onSocket` decides what it does with each connection. */
async function tcpServer(onSocket: (s: Socket) => void): Promise<{ host: string; close(): void }> {
  const sockets = new Set<Socket>();
  const srv: NetServer = createServer((sock) => {
    sockets.add(sock);
    sock.on("error", () => undefined);
    sock.once("close", () => sockets.delete(sock));
    onSocket(sock);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  return { host: `127.0.0.1:${(srv.address() as AddressInfo).port}`, close: () => (srv.close(), sockets.forEach((s) => s.destroy())) };
}

/**
 * A proxy to `upstream` that passes everything but blobs over 1 MiB: "stall" sends their first
 * 256 KiB and then holds the connection open; "corrupt" sends them whole with one byte changed and
 * answers every manifest asked for by digest with the manifest of tag `1` of the same repository.
 */
async function badProxy(upstream: string, mode: "stall" | "corrupt"): Promise<{ host: string; close(): void }> {
  const held = new Set<Socket>();
  const srv: Server = createHttpServer((req, res) => {
    held.add(req.socket);
    const [hostname, port] = upstream.split(":");
    const path = mode === "corrupt" ? (req.url ?? "").replace(/\/manifests\/sha256:[0-9a-f]{64}$/, "/manifests/1") : req.url;
    const up = request({ hostname, port: Number(port), path, method: req.method, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      if (!/\/blobs\/sha256:/.test(req.url ?? "") || Number(ur.headers["content-length"]) <= 1 << 20) return void ur.pipe(res);
      let sent = 0;
      ur.on("data", (c: Buffer) => {
        if (mode === "corrupt") {
          if (sent === 0) c[c.length - 1] ^= 0xff;
          res.write(c);
        } else if (sent < 256 << 10) res.write(c);
        sent += c.length;
      });
      if (mode === "corrupt") ur.on("end", () => res.end());
    });
    up.on("error", () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  return { host: `127.0.0.1:${(srv.address() as AddressInfo).port}`, close: () => (srv.close(), held.forEach((s) => s.destroy())) };
}

/** Makes a CA and a server certificate for 127.0.0.1 signed by it (openssl), in `dir`. */
function makeCerts(dir: string): { ca: string; cert: string; key: string } {
  const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
  ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=sandboxd test CA", "-days", "2");
  ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1");
  writeFileSync(join(dir, "ext.cnf"), "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "ext.cnf");
  return { ca: join(dir, "ca.crt"), cert: join(dir, "server.crt"), key: join(dir, "server.key") };
}

/** What a failed pull would have left half-made in the data dir: temp pulls, blobs not matching their digest, unfinished layers. */
function halfMade(dataDir: string): string[] {
  const out: string[] = [];
  const images = join(dataDir, "templates", "images");
  for (const f of readdirSync(join(images, "tmp"))) out.push(`images/tmp/${f}`);
  const blobs = join(images, "blobs", "sha256");
  for (const f of readdirSync(blobs)) {
    if (createHash("sha256").update(readFileSync(join(blobs, f))).digest("hex") !== f) out.push(`blob ${f} does not match its digest`);
  }
  for (const f of readdirSync(join(images, "images"))) if (!existsSync(join(images, "images", f, "image.json"))) out.push(`images/${f} without image.json`);
  const layers = join(dataDir, "templates", "layers");
  for (const f of existsSync(layers) ? readdirSync(layers) : []) if (f.startsWith(".tmp-")) out.push(`layers/${f}`);
  const builds = join(dataDir, "templates", "builds");
  for (const f of existsSync(builds) ? readdirSync(builds) : []) out.push(`builds/${f}`);
  return out;
}

/** Builds each [name, image, credentials?] with the SDK; the error message of each that fails, or "built". */
function buildAll(s: Sandboxd, cases: [string, string, { username: string; password: string }?][]): Promise<Record<string, string>> {
  return runSdkIn(s, `
    import { Template } from "e2b";
    const out = {};
    for (const [name, image, creds] of ${JSON.stringify(cases)}) {
      try {
        await Template.build(Template().fromImage(image, creds).runCmd("true"), "oci-reg-" + name, { memoryMB: 512 });
        out[name] = "built";
      } catch (e) {
        out[name] = e.message;
      }
    }
    console.log(JSON.stringify(out));
  `, { cwd: ROOT, timeoutMs: 540_000 });
}

describe("pulls from hard registries", { skip: sandboxSkipReason() ?? registrySkipReason() ?? false }, () => {
  let s: Sandboxd;
  const work = mkdtempSync(join(tmpdir(), "oci-reg-test-"));
  const dataDir = mkdtempSync(join(tmpdir(), "sandboxd-oci-reg-"));
  chmodSync(dataDir, 0o755);
  const regs: Registry[] = [];
  const servers: { close(): void }[] = [];
  let tlsReg: Registry;
  let untrusted: Registry;
  let filePriv: Registry;
  let proxy: { host: string };
  let corrupt: { host: string };
  /** The manifest digest of test/nouser:other (the base image) on the plain registry. */
  let otherDigest: string;
  let hang: { host: string };
  let garbage: { host: string };

  before(async () => {
    const certs = makeCerts(work);
    tlsReg = await startRegistry(PRIVATE, certs);
    untrusted = await startRegistry(undefined, certs);
    filePriv = await startRegistry(PRIVATE);
    const plain = await startRegistry();
    regs.push(tlsReg, untrusted, filePriv, plain);
    proxy = await badProxy(plain.host, "stall");
    corrupt = await badProxy(plain.host, "corrupt");
    hang = await tcpServer(() => undefined);
    garbage = await tcpServer((sock) => sock.end(Buffer.from("\x00\xffthis is not a registry\r\n\r\n", "latin1")));
    servers.push(proxy as { host: string; close(): void }, corrupt as { host: string; close(): void }, hang as { host: string; close(): void }, garbage as { host: string; close(): void });
    const base = cachedBaseRootfs(CACHE_DIR);
    assert.ok(base, "the base rootfs is cached (built by any sandboxd's start)");
    const layout = await fixtureLayout(CACHE_DIR, base);
    const creds = `${PRIVATE.user}:${PRIVATE.password}`;
    push(layout, "app", `${tlsReg.host}/private/app:1`, { creds });
    push(layout, "app", `${tlsReg.host}/private/other:1`, { creds });
    push(layout, "app", `${untrusted.host}/test/app:1`);
    push(layout, "app", `${filePriv.host}/private/app:1`, { creds });
    push(layout, "nouser", `${plain.host}/test/nouser:1`);
    push(layout, "debian", `${plain.host}/test/nouser:other`);
    const raw = execFileSync("skopeo", ["inspect", "--raw", "--tls-verify=false", `docker://${plain.host}/test/nouser:other`]);
    otherDigest = `sha256:${createHash("sha256").update(raw).digest("hex")}`;
    // Docker's certs.d layout: the test CA for the TLS registry only
    const certsDir = join(work, "certs.d");
    mkdirSync(join(certsDir, tlsReg.host), { recursive: true });
    writeFileSync(join(certsDir, tlsReg.host, "ca.crt"), readFileSync(certs.ca));
    const b64 = (pw: string) => Buffer.from(`${PRIVATE.user}:${pw}`).toString("base64");
    const authFile = join(work, "config.json");
    writeFileSync(authFile, JSON.stringify({ auths: { [tlsReg.host]: { auth: b64(PRIVATE.password) }, [filePriv.host]: { auth: b64(FILE_WRONG) } } }), { mode: 0o600 });
    s = await startSandboxd({
      dataDir,
      args: [
        "--registry-certs-dir", certsDir, "--registry-auth-file", authFile, "--registry-timeout", String(TIMEOUT_S),
        "--insecure-registry", filePriv.host, "--insecure-registry", proxy.host, "--insecure-registry", corrupt.host, "--insecure-registry", garbage.host,
      ],
    });
  });
  after(async () => {
    await s?.stop();
    for (const r of regs) await r.stop();
    for (const x of servers) x.close();
    rmSync(work, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("a registry that stops sending mid-layer: the build fails after --registry-timeout, naming the image; nothing of the pull is left", async (t) => {
    const got = await buildAll(s, [["stall", `${proxy.host}/test/nouser:1`]]);
    t.diagnostic(JSON.stringify(got));
    assert.match(got.stall, new RegExp(`pulling ${proxy.host}/test/nouser:1: failed: the registry sent nothing for ${TIMEOUT_S} s`));
    assert.deepEqual(halfMade(dataDir), []);
    assert.deepEqual(readdirSync(join(dataDir, "templates", "images", "images")), []);
  });

  test("a registry that serves a corrupted layer, or another manifest than the digest asked for: the build fails naming the image; no blob of it is kept", async (t) => {
    const got = await buildAll(s, [
      ["corrupt", `${corrupt.host}/test/nouser:1`],
      ["mismatch", `${corrupt.host}/test/nouser@${otherDigest}`],
    ]);
    t.diagnostic(JSON.stringify(got));
    assert.match(got.corrupt, new RegExp(`pulling ${corrupt.host}/test/nouser:1: failed: .*[Dd]igest`));
    assert.match(got.mismatch, new RegExp(`pulling ${corrupt.host}/test/nouser@${otherDigest}: failed: .*digest`));
    assert.deepEqual(halfMade(dataDir), []);
    assert.deepEqual(readdirSync(join(dataDir, "templates", "images", "images")), []);
  });

  test("TLS from the test CA in --registry-certs-dir, credentials from --registry-auth-file: builds; an unknown tag and an untrusted CA fail naming the image", async (t) => {
    const got = await buildAll(s, [
      ["tls", `${tlsReg.host}/private/app:1`],
      ["unknown", `${tlsReg.host}/private/app:nope`],
      ["untrusted", `${untrusted.host}/test/app:1`],
    ]);
    t.diagnostic(JSON.stringify(got));
    assert.equal(got.tls, "built");
    assert.match(got.unknown, new RegExp(`pulling ${tlsReg.host}/private/app:nope: not found`));
    assert.match(got.untrusted, new RegExp(`pulling ${untrusted.host}/test/app:1: failed: .*(x509|certificate)`));
    assert.deepEqual(halfMade(dataDir), []);
  });

  test("wrong credentials, from the SDK or from the auth file: access denied naming the image, no password anywhere", async (t) => {
    const got = await buildAll(s, [
      ["sdk-wrong", `${tlsReg.host}/private/other:1`, { username: PRIVATE.user, password: SDK_WRONG }],
      ["file-wrong", `${filePriv.host}/private/app:1`],
    ]);
    t.diagnostic(JSON.stringify(got));
    assert.match(got["sdk-wrong"], new RegExp(`pulling ${tlsReg.host}/private/other:1: access denied`));
    assert.match(got["file-wrong"], new RegExp(`pulling ${filePriv.host}/private/app:1: access denied`));
    for (const pw of [PRIVATE.password, SDK_WRONG, FILE_WRONG]) {
      assert.ok(!JSON.stringify(got).includes(pw), `${pw} in a build error`);
      assert.ok(!s.logs().includes(pw), `${pw} in sandboxd's log`);
    }
    assert.deepEqual(halfMade(dataDir), []);
  });

  test("a registry that never answers fails within --registry-timeout; one that answers garbage fails; both name the image and leave nothing", async (t) => {
    const got = await buildAll(s, [
      ["hang", `${hang.host}/test/app:1`],
      ["garbage", `${garbage.host}/test/app:1`],
    ]);
    t.diagnostic(JSON.stringify(got));
    assert.match(got.hang, new RegExp(`pulling ${hang.host}/test/app:1: failed: the registry did not answer within ${TIMEOUT_S} s`));
    assert.match(got.garbage, new RegExp(`pulling ${garbage.host}/test/app:1: failed: .+`));
    assert.deepEqual(halfMade(dataDir), []);
  });
});

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { api } from "../helpers/api-client.js";
import { h1, h2, h2session, sandboxdPid, sandboxHost, wsHandshake, type Outcome } from "../helpers/hostile.js";
import { alive, ROOT, sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/sdk-run.js";

const HOSTILE = 8000;
const BYSTANDER = 8001;
const TLS_PORT = 8443;
const TLS_UNLISTED = 8444;

/** Answers whose head cannot be relayed: each must be a 502 on its own request. */
const HEAD_FAILURES = ["s600", "s099", "s000", "s999", "s101", "flood1xx", "longstatus", "nulheader", "crheader", "badname", "endlessheaders"];
/** Answers that break after a good head: the client must see a failure, never a clean end. */
const BODY_FAILURES = ["badchunks", "early", "reset"];

/** An HTTPS server in the sandbox with the certificate the test made (openssl on the host). */
const TLS_SERVER = `
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("secure hello " + self.path).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain("/tmp/cert.pem", "/tmp/key.pem")
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("listening", flush=True)
srv.serve_forever()
`;

/** The other tenant's server: a static file over HTTP. */
const BYSTANDER_SERVER = `
import functools, http.server
srv = http.server.ThreadingHTTPServer(("0.0.0.0", ${BYSTANDER}), functools.partial(http.server.SimpleHTTPRequestHandler, directory="/tmp/www"))
print("listening", flush=True)
srv.serve_forever()
`;

describe("a hostile server in a sandbox cannot stop sandboxd or break other requests", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  let ca: Buffer;
  let hostile = "";
  let bystander = "";
  let certDir = "";
  let pid = 0;

  before(async () => {
    s = await startSandboxd();
    ca = readFileSync(s.caFile);
    pid = sandboxdPid(s);
    certDir = mkdtempSync(join(tmpdir(), "attack-proxy-cert-"));
    const r = spawnSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=sandbox.internal", "-days", "1", "-keyout", join(certDir, "key.pem"), "-out", join(certDir, "cert.pem")], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    const files = {
      "/tmp/hostile.py": readFileSync(join(ROOT, "test/sandboxd/fixtures/hostile_upstream.py"), "utf8"),
      "/tmp/tls.py": TLS_SERVER,
      "/tmp/cert.pem": readFileSync(join(certDir, "cert.pem"), "utf8"),
      "/tmp/key.pem": readFileSync(join(certDir, "key.pem"), "utf8"),
    };
    const got = await runSdk(s, `
      import { Sandbox } from "e2b";
      const files = ${JSON.stringify(files)};
      /**
       * Starts a server in its own session (a command's processes end with its stream) and waits
       * for its "listening" line through a FIFO.
       */
      const serve = async (sbx, name, cmd) => {
        const r = await sbx.commands.run(\`rm -f /tmp/\${name}.ready; mkfifo /tmp/\${name}.ready; (setsid \${cmd} > /tmp/\${name}.ready 2>/dev/null < /dev/null &); head -n1 /tmp/\${name}.ready\`);
        if (!r.stdout.includes("listening")) throw new Error(name + " did not start: " + r.stdout + r.stderr);
      };
      const a = await Sandbox.create({ timeoutMs: 1_200_000, network: { httpsPorts: [${TLS_PORT}] } });
      const b = await Sandbox.create({ timeoutMs: 1_200_000 });
      for (const [path, data] of Object.entries(files)) await a.files.write(path, data);
      await serve(a, "hostile", "python3 -u /tmp/hostile.py ${HOSTILE}");
      await serve(a, "tls", "python3 -u /tmp/tls.py ${TLS_PORT}");
      await serve(a, "tls2", "python3 -u /tmp/tls.py ${TLS_UNLISTED}");
      await b.files.write("/tmp/www/index.html", "bystander ok");
      await b.files.write("/tmp/www.py", ${JSON.stringify(BYSTANDER_SERVER)});
      await serve(b, "www", "python3 -u /tmp/www.py");
      console.log(JSON.stringify({ a: a.sandboxId, b: b.sandboxId }));
    `);
    hostile = got.a;
    bystander = got.b;
  });
  after(async () => {
    const logs = s?.logs() ?? "";
    await s?.stop();
    if (certDir) rmSync(certDir, { recursive: true, force: true });
    assert.doesNotMatch(logs, /last-resort/, "a request path threw into the process's last-resort handler");
  });

  const badGateway = (port: number) => `{"sandboxId":"${hostile}","message":"The sandbox's answer on this port could not be relayed","port":${port},"code":502}`;

  /** sandboxd answers /health, the bystander sandbox's server still answers through the proxy, and no request path threw. */
  const stillServing = async (after: string) => {
    assert.ok(alive(pid), `sandboxd exited after ${after}:\n${s.logs().slice(-3000)}`);
    const health = await api(s, ca, "GET", "/health", { key: null });
    assert.equal(health.status, 200, `/health after ${after}: ${health.body}\n${s.logs().slice(-3000)}`);
    const other = await h1(s, ca, sandboxHost(s, BYSTANDER, bystander), "/index.html");
    assert.deepEqual("error" in other ? other : [other.status, other.body], [200, "bystander ok"], `bystander after ${after}`);
    assert.doesNotMatch(s.logs(), /last-resort/, `last-resort handler reached by ${after}`);
  };

  const check = (proto: string, name: string, got: Outcome) => {
    const where = `${proto} ${name}: ${JSON.stringify(got).slice(0, 300)}`;
    if (HEAD_FAILURES.includes(name)) {
      assert.ok(!("error" in got), where);
      assert.equal(got.status, 502, where);
      assert.equal(got.headers["content-type"], "application/json", where);
      assert.equal(got.body, badGateway(HOSTILE), where);
    } else {
      // The head was relayed; the broken body must reach the client as a failure, not a clean end.
      assert.ok("error" in got, where);
    }
  };

  test("over HTTP/1.1: a 502 for every unrelayable head, a cut answer for every broken body; sandboxd and other sandboxes keep serving", async () => {
    for (const name of [...HEAD_FAILURES, ...BODY_FAILURES]) {
      const got = await h1(s, ca, sandboxHost(s, HOSTILE, hostile), `/${name}`);
      await stillServing(`h1 ${name}`);
      check("h1", name, got);
    }
    const never = await h1(s, ca, sandboxHost(s, HOSTILE, hostile), "/never", { stopAfter: 1000 });
    assert.ok(!("error" in never) && never.status === 200, JSON.stringify(never).slice(0, 300));
    const hop = await h1(s, ca, sandboxHost(s, HOSTILE, hostile), "/h2forbidden");
    assert.ok(!("error" in hop), JSON.stringify(hop));
    assert.deepEqual([hop.status, hop.body, hop.headers["x-kept"], hop.headers["x-hop"], hop.headers["keep-alive"], hop.headers["upgrade"]], [200, "ok", "yes", undefined, undefined, undefined]);
    await stillServing("h1 never/h2forbidden");
    const cmd = await runSdk(s, `
      import { Sandbox } from "e2b";
      const b = await Sandbox.connect(${JSON.stringify(bystander)});
      console.log(JSON.stringify((await b.commands.run("echo still here")).stdout));
    `);
    assert.equal(cmd, "still here\n");
  });

  test("over HTTP/2 (the path that stopped the process on a 600): the same answers, one stream each, the session lives", async () => {
    const session = h2session(s, ca);
    try {
      for (const name of [...HEAD_FAILURES, ...BODY_FAILURES]) {
        const got = await h2(session, sandboxHost(s, HOSTILE, hostile), `/${name}`);
        await stillServing(`h2 ${name}`);
        check("h2", name, got);
      }
      const never = await h2(session, sandboxHost(s, HOSTILE, hostile), "/never", { stopAfter: 1000 });
      assert.ok(!("error" in never) && never.status === 200, JSON.stringify(never).slice(0, 300));
      // Connection-specific headers HTTP/2 forbids are dropped, the rest relayed, trailers too.
      const hop = await h2(session, sandboxHost(s, HOSTILE, hostile), "/h2forbidden");
      assert.ok(!("error" in hop), JSON.stringify(hop));
      assert.deepEqual([hop.status, hop.body, hop.headers["x-kept"], hop.headers["x-hop"], hop.headers["connection"], hop.headers["upgrade"], hop.trailers?.["x-trailer"]], [200, "ok", "yes", undefined, undefined, undefined, "t"]);
      // The same session still carries requests.
      const ok = await h2(session, sandboxHost(s, HOSTILE, hostile), "/ok");
      assert.ok(!("error" in ok) && ok.status === 200 && ok.body === "ok", JSON.stringify(ok));
    } finally {
      session.close();
    }
    await stillServing("h2");
  });

  test("WebSocket upgrades: bad status, bad fields, a 1xx flood and no answer are 502s; a good 101 and a declined upgrade are relayed", async () => {
    const host = sandboxHost(s, HOSTILE, hostile);
    for (const path of ["/s600", "/s099", "/longstatus", "/ws/nulheader", "/ws/flood1xx", "/endlessheaders"]) {
      const { head } = await wsHandshake(s, ca, host, path);
      await stillServing(`ws ${path}`);
      assert.match(head, /^HTTP\/1.1 502 /, `${path}: ${head.slice(0, 200)}`);
      assert.ok(head.length < 1000, path);
    }
    const declined = await wsHandshake(s, ca, host, "/ws/declined");
    assert.match(declined.head, /^HTTP\/1.1 403 Forbidden\r\n/);
    const ok = await wsHandshake(s, ca, host, "/ws/ok", "ping-through-proxy");
    assert.match(ok.head, /^HTTP\/1.1 101 Switching Protocols\r\n/);
    assert.match(ok.head, /\r\nX-Ws: yes\r\n/);
    assert.equal(ok.echoed, "ping-through-proxy");
    await stillServing("ws");
  });

  test("network.httpsPorts: the proxy speaks TLS to that port (self-signed certificate), over HTTP/1.1, HTTP/2 and the SDK's getHost", async () => {
    const host = sandboxHost(s, TLS_PORT, hostile);
    const one = await h1(s, ca, host, "/via-h1");
    assert.deepEqual("error" in one ? one : [one.status, one.body], [200, "secure hello /via-h1"]);
    const session = h2session(s, ca);
    const two = await h2(session, host, "/via-h2");
    session.close();
    assert.deepEqual("error" in two ? two : [two.status, two.body], [200, "secure hello /via-h2"]);
    const sdk = await runSdk(s, `
      import { Sandbox } from "e2b";
      const a = await Sandbox.connect(${JSON.stringify(hostile)});
      const r = await fetch("https://" + a.getHost(${TLS_PORT}) + "/via-sdk");
      const info = await a.getInfo();
      console.log(JSON.stringify({ status: r.status, body: await r.text(), httpsPorts: info.network?.httpsPorts }));
    `);
    assert.deepEqual(sdk, { status: 200, body: "secure hello /via-sdk", httpsPorts: [TLS_PORT] });
    // A port not listed is spoken to in plain HTTP: a TLS server there is not HTTP to the proxy.
    const unlisted = await h1(s, ca, sandboxHost(s, TLS_UNLISTED, hostile), "/plain");
    assert.ok(!("error" in unlisted) && unlisted.status === 502, JSON.stringify(unlisted));
    await stillServing("httpsPorts");
  });
});

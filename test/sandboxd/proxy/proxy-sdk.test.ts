import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDaemon, type Daemon } from "../../envd/helpers/daemon.js";
import { DOMAIN, startFront, target, type Front } from "../helpers/proxy-front.js";
import { NODE, ROOT } from "../helpers/sandboxd.js";

const SANDBOX = "isdkthroughproxy000001";

/** Runs a script with the published SDK in a fresh Node that trusts the front's CA, as a user's would. */
function runSdk(front: Front, script: string): Promise<{ code: number | null; out: string }> {
  const dir = mkdtempSync(join(tmpdir(), "sandboxd-sdk-"));
  writeFileSync(join(dir, "ca.crt"), front.ca);
  return new Promise((resolve) => {
    const child = spawn(NODE, ["--input-type=module", "-e", script], {
      cwd: ROOT,
      env: { ...process.env, NODE_EXTRA_CA_CERTS: join(dir, "ca.crt"), E2B_DOMAIN: `${DOMAIN}:${front.port}`, E2B_API_KEY: "e2b_" + "0".repeat(40), E2B_DEBUG: "", E2B_API_URL: "", E2B_SANDBOX_URL: "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c));
    child.stderr.on("data", (c: Buffer) => (out += c));
    child.on("exit", (code) => {
      rmSync(dir, { recursive: true, force: true });
      resolve({ code, out });
    });
  });
}

describe("the published e2b SDK through the proxy to a real envd", () => {
  let front: Front;
  let envd: Daemon | undefined;
  let work: string;
  const ip = `127.0.${1 + (process.pid % 200)}.${2 + (process.pid % 250)}`;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), "sandboxd-sdk-work-"));
    front = await startFront({
      api: (req, res) => {
        // The one API call Sandbox.connect makes; the rest of the SDK's traffic is envd's, through the proxy.
        if (req.method === "POST" && /\/sandboxes\/[a-z0-9]+\/connect$/.test(req.url ?? "")) {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ sandboxID: SANDBOX, templateID: "base", clientID: "6532622b", envdVersion: "0.5.7", alias: "base" }));
          return;
        }
        res.writeHead(404, { "content-type": "application/json" });
        res.end('{"code":404,"message":"not here"}');
      },
    });
    // envd on its real port 49983, on a loopback address of its own so parallel files do not collide.
    envd = await startDaemon({ args: ["--host", ip, "--port", "49983", "--default-user", "root", "--default-workdir", work] });
    front.targets.set(SANDBOX, target(SANDBOX, 49983, { ip }));
  });
  after(async () => {
    await envd?.stop();
    await front.close();
    rmSync(work, { recursive: true, force: true });
  });

  test("connect → commands.run → files write/read → isRunning, host-routed over TLS; paused → isRunning false", async () => {
    const file = join(work, "through-proxy.txt");
    const script = `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.connect(${JSON.stringify(SANDBOX)});
      const r = await sbx.commands.run("echo hello-through-proxy; echo err >&2; exit 3").catch((e) => e);
      await sbx.files.write(${JSON.stringify(file)}, "x".repeat(300000));
      const back = await sbx.files.read(${JSON.stringify(file)});
      const running = await sbx.isRunning();
      console.log(JSON.stringify({ stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode, size: back.length, running, host: sbx.getHost(8080) }));
    `;
    const r = await runSdk(front, script);
    assert.equal(r.code, 0, r.out);
    const got = JSON.parse(r.out.trim().split("\n").pop()!);
    assert.deepEqual(got, { stdout: "hello-through-proxy\n", stderr: "err\n", exitCode: 3, size: 300000, running: true, host: `8080-${SANDBOX}.${DOMAIN}:${front.port}` });

    front.targets.set(SANDBOX, target(SANDBOX, 49983, { ip, state: "paused" }));
    const paused = await runSdk(front, `
      import { Sandbox } from "e2b";
      const sbx = await Sandbox.connect(${JSON.stringify(SANDBOX)});
      console.log(JSON.stringify({ running: await sbx.isRunning() }));
    `);
    front.targets.set(SANDBOX, target(SANDBOX, 49983, { ip }));
    assert.equal(paused.code, 0, paused.out);
    assert.deepEqual(JSON.parse(paused.out.trim().split("\n").pop()!), { running: false });
  });
});

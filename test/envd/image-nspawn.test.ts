// The deployable artifact, tested the way it is deployed: built as a single executable, unpacked
// and installed, then booted in a minimal Debian root filesystem (no Node in it) under
// systemd-nspawn, with envd started by its unit and driven from the host through the e2b SDK.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Sandbox } from "e2b";
import { ROOT } from "./helpers/daemon.js";
import { clients, sdkSandbox } from "./helpers/clients.js";
import {
  ARTIFACT_NAME, Machine, VERSION, buildArtifact, freePort, hostHasSysResource, run, unpackArtifact, waitHealthy, which,
} from "./helpers/image-machine.js";

const IN_CI = process.env.CI === "true" || process.env.ENVD_IMAGE_TEST === "1";

/** Why the image test cannot possibly run on this machine (undefined when it can). */
function cannotBoot(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root";
  const missing = ["debootstrap", "systemd-nspawn", "tar", "chroot"].filter((c) => !which(c));
  if (missing.length > 0) return `${missing.join(", ")} not installed (apt-get install debootstrap systemd-container)`;
  return undefined;
}
const bootSkip = cannotBoot();
// Outside CI an unsuitable machine skips the boot tests; in CI (.ci/run installs the tools) it is a failure.
const skipBoot = bootSkip && !IN_CI ? `image boot test skipped: ${bootSkip}` : false;

let tarball: string;
let scratch: string;
const enc = new TextEncoder();

before(() => {
  tarball = buildArtifact();
  scratch = mkdtempSync(join(tmpdir(), "envd-artifact-"));
}, { timeout: 300_000 });
after(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** Starts an executable envd (not through startDaemon: that one runs dist/envd) and waits for it to listen. */
async function startExe(exe: string, env: NodeJS.ProcessEnv) {
  const dir = mkdtempSync(join(tmpdir(), "envd-exe-"));
  const args = ["--port", "0", "--default-user", "user", "--default-workdir", "/home/user", "--clock", "off",
    "--run-dir", join(dir, "run"), "--hosts-file", join(dir, "hosts"), "--ca-bundle", join(dir, "ca.crt"), "--ca-cert", join(dir, "e2b-ca.crt")];
  const proc = spawn(exe, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  proc.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  proc.stderr.setEncoding("utf8").on("data", (d: string) => (out += d));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill("SIGTERM");
      await new Promise((r) => proc.once("exit", r));
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`envd did not listen in 15 s:\n${out}`)), 15_000);
    proc.stdout.on("data", () => {
      const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(out);
      if (m) (clearTimeout(timer), resolve(Number(m[1])));
    });
    proc.once("exit", (code) => (clearTimeout(timer), reject(new Error(`envd exited with ${code}:\n${out}`))));
  }).catch(async (err) => {
    await stop();
    throw err;
  });
  return { url: `http://127.0.0.1:${port}`, stop, logs: () => out };
}

/** A clean environment: no NODE_* variables, no ENVD_ADDON_DIR, a plain PATH. */
const bareEnv = (): NodeJS.ProcessEnv => ({ PATH: "/usr/sbin:/usr/bin:/sbin:/bin", HOME: "/root", LANG: "C.UTF-8" });

describe("artifact", () => {
  test("the tarball holds the executable, addons, node-pty, the unit and install.sh", () => {
    const dir = unpackArtifact(tarball, scratch);
    for (const f of ["envd", "inotify.node", "xattr.node", "envd.service", "install.sh", "VERSION",
      "node_modules/node-pty/package.json", "node_modules/node-pty/lib/index.js", "node_modules/node-pty/build/Release/pty.node"]) {
      assert.ok(existsSync(join(dir, f)), `${ARTIFACT_NAME}/${f} is missing`);
    }
    assert.equal(readFileSync(join(dir, "VERSION"), "utf8").trim(), VERSION);
    const unit = readFileSync(join(dir, "envd.service"), "utf8");
    for (const line of ["User=root", "ExecStart=/usr/bin/envd", "Restart=always", "StartLimitIntervalSec=0", "OOMScoreAdjust=-1000",
      "Nice=-20", "IOSchedulingClass=realtime", "IOSchedulingPriority=4", "WantedBy=multi-user.target"]) {
      assert.ok(unit.split("\n").includes(line), `envd.service lacks ${line}`);
    }
    // A single executable: an ELF file carrying the SEA blob, not a script for some node.
    const head = readFileSync(join(dir, "envd")).subarray(0, 4);
    assert.deepEqual([...head], [0x7f, 0x45, 0x4c, 0x46]);
    assert.equal(run(join(dir, "envd"), ["--version"], { env: bareEnv() }).trim(), VERSION);
  });

  test("unpacked, it serves PTYs, watches and metadata with addons found beside it", async () => {
    const d = await startExe(join(scratch, ARTIFACT_NAME, "envd"), bareEnv());
    try {
      const sbx = await sdkSandbox(d.url);
      let text = "";
      const dec = new TextDecoder();
      const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (b) => void (text += dec.decode(b, { stream: true })), timeoutMs: 30_000 });
      await sbx.pty.sendInput(h.pid, enc.encode("echo pty-$((6*7)) $(whoami); exit 0\n"));
      assert.equal((await h.wait()).exitCode, 0);
      assert.match(text, /pty-42 user/);
      const dir = `/tmp/envd-artifact-watch-${process.pid}`;
      await sbx.files.makeDir(dir);
      try {
        const seen: string[] = [];
        const w = await sbx.files.watchDir(dir, (e) => void seen.push(`${e.type}:${e.name}`));
        const info = await sbx.files.write(`${dir}/m.txt`, "x", { metadata: { author: "artifact" } });
        assert.deepEqual((info as { metadata?: unknown }).metadata, { author: "artifact" });
        for (let i = 0; i < 50 && !seen.some((s) => s.endsWith(":m.txt")); i++) await new Promise((r) => setTimeout(r, 100));
        await w.stop();
        assert.ok(seen.some((s) => s.endsWith(":m.txt")), `no watch event for m.txt: ${seen.join(", ")}`);
      } finally {
        await sbx.files.remove(dir);
      }
    } finally {
      await d.stop();
    }
  });

  test("install.sh --root lays out /usr/bin/envd, /usr/lib/envd and the enabled unit; re-running upgrades", () => {
    const root = join(scratch, "rootfs");
    run("mkdir", ["-p", root]);
    for (let i = 0; i < 2; i++) run(join(scratch, ARTIFACT_NAME, "install.sh"), ["--root", root], { env: bareEnv() });
    for (const f of ["usr/bin/envd", "usr/lib/envd/inotify.node", "usr/lib/envd/xattr.node", "usr/lib/envd/node_modules/node-pty/build/Release/pty.node",
      "usr/lib/systemd/system/envd.service"]) {
      assert.ok(existsSync(join(root, f)), `/${f} was not installed`);
    }
    assert.ok(!existsSync(join(root, "usr/lib/envd.old")) && !existsSync(join(root, "usr/lib/envd.new")), "no staging dirs left behind");
    const wants = join(root, "etc/systemd/system/multi-user.target.wants/envd.service");
    assert.ok(lstatSync(wants).isSymbolicLink(), "the unit is enabled");
    assert.match(readlinkSync(wants), /^\/(usr\/)?lib\/systemd\/system\/envd\.service$/);
    // Installed, the executable finds its addons in ../lib/envd (it loads node-pty and xattr at start).
    assert.equal(run(join(root, "usr/bin/envd"), ["--version"], { env: bareEnv() }).trim(), VERSION);
  });
});

describe("image booted with systemd-nspawn", { skip: skipBoot }, () => {
  let m: Machine | undefined;
  let url = "";
  let sbx: Sandbox;
  let bootMs = 0;
  const killOnExit = () => {
    const pid1 = m?.pid1();
    if (pid1) process.kill(pid1, "SIGKILL");
    m?.proc.kill("SIGKILL");
  };

  before(async () => {
    if (bootSkip) throw new Error(`cannot run the image test in CI: ${bootSkip}`);
    const rootfsTar = run(join(ROOT, "scripts", "package-rootfs.sh"), [], { timeoutMs: 900_000 }).trim().split("\n").pop()!;
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    process.once("exit", killOnExit);
    const t0 = Date.now();
    m = Machine.boot({ rootfsTar, artifactDir: join(scratch, ARTIFACT_NAME), port });
    const boot0 = Date.now();
    await waitHealthy(url, 90_000, () => m!.logs().slice(-4000));
    bootMs = Date.now() - boot0;
    process.stderr.write(`image: prepared in ${boot0 - t0} ms, healthy ${bootMs} ms after nspawn started\n`);
    sbx = await sdkSandbox(url);
  }, { timeout: 900_000 });

  after(async () => {
    process.off("exit", killOnExit);
    await m?.destroy();
  }, { timeout: 60_000 });

  test("envd runs as the enabled unit with the unit's priorities", async () => {
    const r = await sbx.commands.run(
      "systemctl is-enabled envd; systemctl is-active envd; pid=$(systemctl show -p MainPID --value envd); " +
        "readlink /proc/$pid/exe; ps -o ni= -p $pid; ionice -p $pid; cat /proc/$pid/oom_score_adj; " +
        "systemctl show -p Restart -p OOMScoreAdjust -p User envd",
      { user: "root" },
    );
    const lines = r.stdout.trim().split("\n").map((l) => l.trim());
    assert.deepEqual(lines.slice(0, 3), ["enabled", "active", "/usr/bin/envd"]);
    assert.equal(lines[3], "-20");
    assert.equal(lines[4], "realtime: prio 4");
    // Where the host itself lacks CAP_SYS_RESOURCE, systemd cannot lower the score and goes on (as in any container).
    assert.equal(lines[5], hostHasSysResource() ? "-1000" : "0");
    assert.ok(lines.includes("Restart=always") && lines.includes("OOMScoreAdjust=-1000") && lines.includes("User=root"), r.stdout);
  });

  test("no Node in the image; commands run as `user`; envd --version matches package.json", async () => {
    const r = await sbx.commands.run("id -un && node --version || true");
    assert.equal(r.stdout, "user\n");
    assert.match(r.stderr, /node: (command )?not found/);
    const none = await sbx.commands.run(
      "command -v node nodejs || echo no-node; ls /usr/lib/envd/node_modules; test -f /usr/lib/envd/inotify.node && echo inotify; envd --version",
      { user: "root" },
    );
    assert.equal(none.stdout, `no-node\nnode-pty\ninotify\n${VERSION}\n`);
    // What envd starts does not inherit its priorities (§8.2): niceness 0, default IO class, OOM score 100.
    const env = await sbx.commands.run('pwd; echo "$HOME $FOO"; sudo -n id -un; ps -o ni= -p $$; ionice; cat /proc/self/oom_score_adj', {
      envs: { FOO: "bar" },
    });
    const got = env.stdout.split("\n").map((l) => l.trim().replace(/^(none|best-effort): prio 4$/, "IO"));
    assert.deepEqual(got, ["/home/user", "/home/user bar", "root", "0", "IO", "100", ""]);
  });

  test("files: write, read, list, metadata, rename, remove", async () => {
    const dir = "/home/user/image-files";
    await sbx.files.makeDir(dir);
    const w = await sbx.files.write(`${dir}/a.txt`, "hello image", { metadata: { origin: "nspawn" } });
    assert.deepEqual((w as { metadata?: unknown }).metadata, { origin: "nspawn" });
    assert.equal(await sbx.files.read(`${dir}/a.txt`), "hello image");
    const bytes = new Uint8Array(256).map((_, i) => i);
    await sbx.files.write(`${dir}/b.bin`, bytes.buffer);
    assert.deepEqual(new Uint8Array(await sbx.files.read(`${dir}/b.bin`, { format: "bytes" })), bytes);
    const list = await sbx.files.list(dir);
    assert.deepEqual(list.map((e) => `${e.name}:${e.type}:${e.owner}`).sort(), ["a.txt:file:user", "b.bin:file:user"]);
    // The generated client sees the metadata kept in xattrs too.
    const st = await clients(url).fs.json.stat({ path: `${dir}/a.txt` }, { headers: { authorization: "Basic " + btoa("user:") } });
    assert.deepEqual({ ...st.entry?.metadata }, { origin: "nspawn" });
    await sbx.files.rename(`${dir}/a.txt`, `${dir}/c.txt`);
    assert.equal(await sbx.files.exists(`${dir}/a.txt`), false);
    assert.equal((await sbx.files.getInfo(`${dir}/c.txt`)).size, 11);
    await sbx.files.remove(dir);
    assert.equal(await sbx.files.exists(dir), false);
  });

  test("watchDir reports changes made by a command", async () => {
    const dir = "/home/user/image-watch";
    await sbx.files.makeDir(dir);
    const seen: string[] = [];
    const w = await sbx.files.watchDir(dir, (e) => void seen.push(`${e.type}:${e.name}`));
    await sbx.commands.run(`echo x > ${dir}/new.txt`);
    for (let i = 0; i < 50 && !seen.includes("write:new.txt"); i++) await new Promise((r) => setTimeout(r, 100));
    await w.stop();
    assert.ok(seen.includes("create:new.txt") && seen.includes("write:new.txt"), seen.join(", "));
    await sbx.files.remove(dir);
  });

  test("pty round trip: size, user, input, exit", async () => {
    let text = "";
    const dec = new TextDecoder();
    const h = await sbx.pty.create({ cols: 90, rows: 20, onData: (b) => void (text += dec.decode(b, { stream: true })), timeoutMs: 30_000 });
    await sbx.pty.sendInput(h.pid, enc.encode("echo size=$(tput cols)x$(tput lines) me=$(whoami) sum=$((40+2)); exit 7\n"));
    const r = await h.wait().catch((e: { exitCode?: number }) => e);
    assert.equal(r.exitCode, 7);
    assert.match(text, /size=90x20 me=user sum=42/);
  });

  test("background command, stdin, list and kill", async () => {
    const h = await sbx.commands.run("cat", { background: true, stdin: true });
    let out = "";
    const h2 = await sbx.commands.connect(h.pid, { onStdout: (s) => void (out += s) });
    await sbx.commands.sendStdin(h.pid, "ping\n");
    for (let i = 0; i < 50 && !out.includes("ping"); i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(out, "ping\n");
    assert.ok((await sbx.commands.list()).some((p) => p.pid === h.pid));
    assert.equal(await sbx.commands.kill(h.pid), true);
    await assert.rejects(h2.wait());
  });

  test("Restart=always: a killed envd is back within seconds", async () => {
    const before = await sbx.commands.run("systemctl show -p MainPID --value envd", { user: "root" });
    const oldPid = before.stdout.trim();
    const survivor = await sbx.commands.run("sleep 600", { background: true });
    // Detached so this command's own exit is reported before envd dies.
    await sbx.commands.run(`setsid sh -c 'sleep 0.5; kill -9 ${oldPid}' >/dev/null 2>&1 < /dev/null &`, { user: "root" });
    await new Promise((r) => setTimeout(r, 1500));
    await waitHealthy(url, 20_000, () => m!.logs().slice(-4000));
    const fresh = await sdkSandbox(url);
    const after = await fresh.commands.run("systemctl show -p MainPID --value envd; systemctl show -p NRestarts --value envd", { user: "root" });
    const [newPid, restarts] = after.stdout.trim().split("\n");
    assert.notEqual(newPid, oldPid);
    assert.equal(restarts, "1");
    // KillMode=process: a process envd started outlives envd's crash and restart.
    const alive = await fresh.commands.run(`kill -0 ${survivor.pid} && echo alive; kill ${survivor.pid}`, { user: "root" });
    assert.equal(alive.stdout.trim(), "alive");
    sbx = fresh;
  });

  test("upgrade in place: install.sh on the running system swaps files and restarts envd", async () => {
    run("cp", ["-a", join(scratch, ARTIFACT_NAME), join(m!.rootDir, "root", "envd-upgrade")]);
    const before = (await sbx.commands.run("systemctl show -p MainPID --value envd", { user: "root" })).stdout.trim();
    // In a transient unit of its own: the restart stops everything in envd's cgroup, this command included.
    await sbx.commands.run("systemd-run --quiet --no-block --unit envd-upgrade /root/envd-upgrade/install.sh", { user: "root" });
    const t0 = Date.now();
    let now = before;
    while (now === before && Date.now() - t0 < 30_000) {
      await new Promise((r) => setTimeout(r, 300));
      try {
        await waitHealthy(url, 10_000, () => m!.logs().slice(-4000));
        sbx = await sdkSandbox(url);
        now = (await sbx.commands.run("systemctl show -p MainPID --value envd", { user: "root" })).stdout.trim();
      } catch {
        // envd is restarting
      }
    }
    assert.notEqual(now, before, "envd was restarted by install.sh");
    const r = await sbx.commands.run(
      "ls -d /usr/lib/envd.new /usr/lib/envd.old /usr/bin/.envd.new 2>/dev/null; envd --version; rm -rf /root/envd-upgrade",
      { user: "root" },
    );
    assert.equal(r.stdout, `${VERSION}\n`, "no staging files are left and the new envd answers");
  });

  test("systemctl poweroff through envd shuts the container down cleanly", async () => {
    await sbx.commands.run("setsid sh -c 'sleep 0.3; systemctl poweroff' >/dev/null 2>&1 < /dev/null &", { user: "root" });
    const code = await m!.waitExit(60_000);
    assert.equal(code, 0, `nspawn ended with ${code}:\n${m!.logs().slice(-3000)}`);
  });
});

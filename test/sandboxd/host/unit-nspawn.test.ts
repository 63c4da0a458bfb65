// sandboxd's release tarball, installed the way it is deployed (install.sh, then systemd starts
// the unit) into a clean minimal Debian 12 booted with systemd-nspawn. That root filesystem has
// none of sandboxd's Debian packages, so the unit's start must end in the prerequisite check:
// exit 3, no restart loop, and the journal naming the missing parts and the apt-get line that
// `sandboxd setup` would run. (Sandboxes themselves cannot run inside this container: nested
// runc, nftables and cgroups are not what is tested here.)
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { envdArtifactDir, ROOT } from "../helpers/sandboxd.js";
import { hostHasSysResource, removeTree, run, which } from "../../envd/helpers/image-machine.js";

const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const NAME = `sandboxd-${VERSION}-linux-${process.arch}`;
const TARBALL = join(ROOT, "dist", `${NAME}.tar.gz`);
const IN_CI = process.env.CI === "true";

/** Why the container cannot boot here (undefined when it can). */
function cannotBoot(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root";
  const missing = ["debootstrap", "systemd-nspawn", "nsenter", "tar"].filter((c) => !which(c));
  return missing.length > 0 ? `${missing.join(", ")} not installed (apt-get install debootstrap systemd-container)` : undefined;
}
const bootSkip = cannotBoot();
const skipBoot = bootSkip && !IN_CI ? `unit boot test skipped: ${bootSkip}` : false;
const bareEnv = (): NodeJS.ProcessEnv => ({ PATH: "/usr/sbin:/usr/bin:/sbin:/bin", HOME: "/root", LANG: "C.UTF-8" });

let scratch: string;
let release: string;
before(() => {
  // The release tarball: built here when missing or older than the bundle (./build.sh --artifact builds it too).
  envdArtifactDir();
  const fresh = existsSync(TARBALL) && statSync(TARBALL).mtimeMs >= statSync(join(ROOT, "dist", "sandboxd.cjs")).mtimeMs;
  if (!fresh) run(join(ROOT, "node_modules", ".bin", "node"), [join(ROOT, "scripts", "package-sandboxd.mjs")], { cwd: ROOT });
  scratch = mkdtempSync(join(tmpdir(), "sandboxd-release-"));
  run("tar", ["-C", scratch, "-xzf", TARBALL]);
  release = join(scratch, NAME);
}, { timeout: 600_000 });
after(() => rmSync(scratch, { recursive: true, force: true }));

describe("release tarball", () => {
  test("holds the unit with start order, restart policy and the data and cache dirs; install.sh lays it out and enables it", () => {
    const unit = readFileSync(join(release, "sandboxd.service"), "utf8").split("\n");
    for (const line of ["Wants=network-online.target", "After=network-online.target nftables.service local-fs.target", "ExecStart=/usr/bin/sandboxd serve",
      "StateDirectory=sandboxd", "CacheDirectory=sandboxd", "Environment=SANDBOXD_DATA_DIR=/var/lib/sandboxd SANDBOXD_CACHE_DIR=/var/cache/sandboxd",
      "Restart=on-failure", "RestartPreventExitStatus=2 3", "KillMode=process", "WantedBy=multi-user.target"]) {
      assert.ok(unit.includes(line), `sandboxd.service lacks ${line}`);
    }
    const root = join(scratch, "rootfs");
    mkdirSync(root);
    for (let i = 0; i < 2; i++) run(join(release, "install.sh"), ["--root", root], { env: bareEnv() });
    for (const f of ["usr/lib/sandboxd/sandboxd", "usr/lib/sandboxd/lib/node", "usr/lib/sandboxd/lib/sandboxd.cjs", "usr/lib/sandboxd/envd/envd", "usr/lib/systemd/system/sandboxd.service"]) {
      assert.ok(existsSync(join(root, f)), `/${f} was not installed`);
    }
    assert.equal(readlinkSync(join(root, "usr/bin/sandboxd")), "/usr/lib/sandboxd/sandboxd");
    const wants = join(root, "etc/systemd/system/multi-user.target.wants/sandboxd.service");
    assert.ok(lstatSync(wants).isSymbolicLink(), "the unit is enabled");
    assert.ok(!existsSync(join(root, "usr/lib/sandboxd.old")) && !existsSync(join(root, "usr/lib/sandboxd.new")), "no staging dirs left behind");
    // Installed, it runs on the Node it brings, with only the system's PATH.
    assert.equal(run(join(root, "usr/lib/sandboxd/sandboxd"), ["--version"], { env: bareEnv() }).trim(), VERSION);
  });
});

/** Runs `cmd` inside the container (all of its namespaces) and returns what it printed. */
function inside(pid1: number, cmd: string[]): { status: number | null; out: string } {
  const r = spawnSync("nsenter", ["-t", String(pid1), "-m", "-u", "-i", "-n", "-p", "--", ...cmd], { encoding: "utf8", env: bareEnv(), timeout: 60_000 });
  return { status: r.status, out: (r.stdout ?? "") + (r.stderr ?? "") };
}

describe("the unit booted in a clean Debian 12 under systemd-nspawn", { skip: skipBoot }, () => {
  let proc: ChildProcess | undefined;
  let work = "";
  let console = "";
  const pid1 = (): number | undefined => {
    if (!proc?.pid || proc.exitCode !== null) return undefined;
    try {
      const kids = readFileSync(`/proc/${proc.pid}/task/${proc.pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
      return kids.length > 0 ? Number(kids[0]) : undefined;
    } catch {
      return undefined;
    }
  };

  before(() => {
    const rootfsTar = run(join(ROOT, "scripts", "package-rootfs.sh"), [], { timeoutMs: 1_200_000 }).trim().split("\n").pop()!;
    mkdirSync("/var/tmp", { recursive: true });
    work = mkdtempSync("/var/tmp/sandboxd-unit-");
    const root = join(work, "root");
    mkdirSync(root);
    run("tar", ["-C", root, "--numeric-owner", "-xf", rootfsTar]);
    run(join(release, "install.sh"), ["--root", root], { env: bareEnv() });
    // A private network: nothing the unit does inside can touch the host's interfaces or nftables.
    proc = spawn("systemd-nspawn", ["--register=no", "--keep-unit", "--quiet", "--console=read-only", "--private-network",
      ...(hostHasSysResource() ? ["--capability=CAP_SYS_RESOURCE"] : []), "-M", `sandboxd-unit-${process.pid}`, "-b", "-D", root], { stdio: ["ignore", "pipe", "pipe"] });
    proc.stdout!.setEncoding("utf8").on("data", (d: string) => (console = (console + d).slice(-20_000)));
    proc.stderr!.setEncoding("utf8").on("data", (d: string) => (console = (console + d).slice(-20_000)));
  }, { timeout: 1_500_000 });

  after(async () => {
    const p = pid1();
    if (p) spawnSync("kill", ["-s", "RTMIN+4", String(p)]);
    if (proc && proc.exitCode === null) {
      const exited = new Promise((r) => proc!.once("exit", r));
      const timer = setTimeout(() => {
        const q = pid1();
        if (q) process.kill(q, "SIGKILL");
        proc!.kill("SIGKILL");
      }, 20_000);
      await exited;
      clearTimeout(timer);
    }
    if (work) removeTree(work);
  });

  test("the unit starts after boot, runs the prerequisite check, fails with exit 3 without restarting, and its journal has the apt-get line", async () => {
    let show = "";
    for (let i = 0; ; i++) {
      const p = pid1();
      if (p) {
        show = inside(p, ["systemctl", "show", "sandboxd.service", "-p", "ActiveState", "-p", "ExecMainStatus", "-p", "NRestarts", "-p", "Result"]).out;
        if (/^ActiveState=failed$/m.test(show)) break;
      }
      if (proc!.exitCode !== null || i > 600) assert.fail(`the unit did not end in failed (last: ${show})\n${console}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.match(show, /^ExecMainStatus=3$/m);
    assert.match(show, /^NRestarts=0$/m);
    const p = pid1()!;
    const journal = inside(p, ["journalctl", "-u", "sandboxd.service", "--no-pager", "-o", "cat"]).out;
    assert.match(journal, /sandboxd cannot start: this host lacks what it needs to run sandboxes:/);
    const line = inside(p, ["/usr/bin/sandboxd", "setup", "--print"]).out.split("\n")[0];
    assert.match(line, /^apt-get install -y --no-install-recommends /);
    for (const pkg of ["runc", "nftables", "iproute2", "debootstrap", "tini", "libnss-myhostname"]) assert.ok(line.split(" ").includes(pkg), `${pkg} is not in: ${line}`);
    assert.ok(journal.split("\n").includes(`  ${line}`), `the journal lacks the line '${line}':\n${journal}`);
    // The unit made its state and cache directories before the check ran.
    for (const dir of ["var/lib/sandboxd", "var/cache/sandboxd"]) assert.equal(statSync(join(work, "root", dir)).mode & 0o777, 0o755, dir);
  });
});

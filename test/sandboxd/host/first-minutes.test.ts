// A new user's first minutes: ./dist/sandboxd and ./dist/envd run on the project's Node whatever
// `node` the shell finds, and `serve` on a host that lacks a prerequisite stops before listening
// with the whole list and the exact apt-get line (`sandboxd setup --print` prints the same line).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { release, tmpdir } from "node:os";
import { join } from "node:path";
import { envdArtifactDir, ROOT } from "../helpers/sandboxd.js";

const SANDBOXD = join(ROOT, "dist", "sandboxd");
const ENVD = join(ROOT, "dist", "envd");
const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const IS_ROOT = process.getuid?.() === 0;

/** Every tool `serve` runs by name, and the Debian package the message must name for it. */
const TOOLS: [string, string][] = [
  ["runc", "runc"], ["nft", "nftables"], ["ip", "iproute2"], ["openssl", "openssl"], ["debootstrap", "debootstrap"],
  ["rsync", "rsync"], ["mkfs.ext4", "e2fsprogs"], ["mkfs.xfs", "xfsprogs"], ["xfs_growfs", "xfsprogs"], ["fsfreeze", "util-linux"],
  ["losetup", "mount"], ["skopeo", "skopeo"], ["umoci", "umoci"], ["newuidmap", "uidmap"], ["nsenter", "util-linux"], ["mount", "mount"], ["umount", "mount"], ["chroot", "coreutils"],
];

/** The host's executable `tool` on the usual PATH. */
function hostTool(tool: string): string | undefined {
  for (const d of ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]) if (existsSync(join(d, tool))) return join(d, tool);
  return undefined;
}

let scratch: string;
before(() => {
  scratch = mkdtempSync(join(tmpdir(), "sandboxd-first-"));
  chmodSync(scratch, 0o755);
});
after(() => rmSync(scratch, { recursive: true, force: true }));

/** A directory of links to every needed tool but `without` (and `sh`, which unshare's command runs). */
function toolDir(without: string[]): string {
  const dir = mkdtempSync(join(scratch, "path-"));
  for (const [tool] of TOOLS) {
    if (without.includes(tool)) continue;
    const real = hostTool(tool);
    if (!real) throw new Error(`this host lacks ${tool}: the test needs every prerequisite present`);
    symlinkSync(real, join(dir, tool));
  }
  symlinkSync(hostTool("sh")!, join(dir, "sh"));
  return dir;
}

/** `serve` flags that touch nothing shared: a private data dir, a loopback port, no egress. */
function serveArgs(dataDir: string): string[] {
  return ["serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--egress-interface", "none", "--warm-pool", "0", "--network-cidr", "10.12.199.0/24"];
}

/** Runs ./dist/sandboxd with `args` and only `env` (no inherited PATH). */
function run(file: string, args: string[], env: NodeJS.ProcessEnv) {
  return spawnSync(file, args, { encoding: "utf8", env: { HOME: "/root", LANG: "C.UTF-8", ...env }, timeout: 60_000 });
}

describe("the launchers run on the project's Node", () => {
  // The sandboxd bundle requires node:sqlite as it loads, so even --version fails on Node 20.
  test("./dist/sandboxd and ./dist/envd ignore a `node` earlier on PATH, and the machine's older Node", () => {
    const fake = join(scratch, "fake-node");
    mkdirSync(fake);
    writeFileSync(join(fake, "node"), "#!/bin/sh\necho 'the wrong node ran' >&2\nexit 42\n", { mode: 0o755 });
    const PATH = `${fake}:/usr/sbin:/usr/bin:/sbin:/bin`;
    for (const exe of [SANDBOXD, ENVD]) {
      for (const path of [PATH, "/usr/local/bin:/usr/bin:/bin"]) {
        const r = run(exe, ["--version"], { PATH: path });
        assert.equal(r.status, 0, `${exe} with PATH=${path}: ${r.stderr}`);
        assert.equal(r.stdout.trim(), VERSION);
      }
    }
    // Started through a link elsewhere (as /usr/local/bin/sandboxd might be), it still finds its Node.
    symlinkSync(SANDBOXD, join(fake, "sandboxd"));
    assert.equal(run(join(fake, "sandboxd"), ["--version"], { PATH }).stdout.trim(), VERSION);
  });

  test("run by an older node, sandboxd says which Node it needs instead of failing on node:sqlite", (t) => {
    const old = ["/usr/bin/node", "/usr/local/bin/node"].find((n) => existsSync(n) && Number(spawnSync(n, ["-p", "process.versions.node.split('.')[0]"], { encoding: "utf8" }).stdout) < 24);
    if (!old) return t.skip("no Node older than 24 on this machine");
    const r = spawnSync(old, [SANDBOXD, "--version"], { encoding: "utf8" });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /sandboxd needs Node 24 or later \(node:sqlite\); .* is Node \d+\.\d+\.\d+\. Run it as \.\/dist\/sandboxd/);
  });
});

describe("serve checks the host before it listens", { skip: IS_ROOT ? false : "serve needs root" }, () => {
  test("each tool hidden from PATH: exit 3 before listening, naming the tool and the apt-get line", () => {
    for (const [tool, pkg] of TOOLS) {
      const dataDir = join(scratch, `data-${tool}`);
      const r = run(SANDBOXD, serveArgs(dataDir), { PATH: toolDir([tool]) });
      assert.equal(r.status, 3, `${tool}: exit ${r.status}\n${r.stderr}`);
      assert.equal(r.stdout, "", `${tool}: nothing for the user's shell (it never listened)`);
      assert.match(r.stderr, new RegExp(`^  - ${tool.replace(".", "\\.")}: not found on PATH .*\\[Debian package ${pkg}\\]$`, "m"), tool);
      assert.match(r.stderr, new RegExp(`^  apt-get install -y --no-install-recommends ${pkg}$`, "m"), tool);
      assert.match(r.stderr, /or run 'sandboxd setup', which runs that line/);
      assert.equal(existsSync(join(dataDir, "sandboxd.db")), false, `${tool}: nothing was made in the data dir`);
      // setup --print prints exactly that line, for a script or a README to run.
      const print = run(SANDBOXD, ["setup", "--print", "--data-dir", dataDir], { PATH: toolDir([tool]) });
      assert.equal(print.stdout, `apt-get install -y --no-install-recommends ${pkg}\n`, tool);
      assert.equal(print.status, 1);
    }
  });

  test("several missing at once are listed together, with one apt-get line", () => {
    const r = run(SANDBOXD, serveArgs(join(scratch, "data-many")), { PATH: toolDir(["runc", "nft", "ip", "debootstrap"]) });
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, /^  apt-get install -y --no-install-recommends runc nftables iproute2 debootstrap$/m);
  });

  test("a checkout or data dir under a 0700 directory (as /root is): serve names the directory sandboxes cannot pass and the chmod", () => {
    const home = mkdtempSync(join(scratch, "home-"));
    chmodSync(home, 0o700);
    symlinkSync(envdArtifactDir(), join(home, "envd"));
    const r = run(SANDBOXD, [...serveArgs(join(home, "data")), "--envd-dir", join(home, "envd")], { PATH: toolDir([]) });
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, new RegExp(`^  - the data dir reachable by sandboxes: the data dir ${home}/x is not reachable by sandbox root \\(host uid \\d+\\): ${home} has mode 700; chmod o\\+x ${home} or choose another location$`, "m"));
    assert.match(r.stderr, new RegExp(`^  - the envd directory reachable by sandboxes: .*${home} has mode 700; chmod o\\+x ${home}`, "m"));
  });

  test("with everything present, setup --print prints no line and exits 0", () => {
    const r = run(SANDBOXD, ["setup", "--print", "--data-dir", join(scratch, "data-all")], { PATH: toolDir([]) });
    assert.equal(r.stderr, "");
    assert.equal(r.stdout, "");
    assert.equal(r.status, 0);
  });
});

/**
 * Runs serve in a private mount namespace after the shell `setup` (bind mounts that hide or
 * replace a host file for that namespace only; they end with it).
 */
function serveIn(setup: string, dataDir: string) {
  const script = `set -e\n${setup}\nexec "${SANDBOXD}" ${serveArgs(dataDir).map((a) => `'${a}'`).join(" ")}\n`;
  return spawnSync("unshare", ["--mount", "--propagation", "private", "sh", "-c", script], { encoding: "utf8", env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", HOME: "/root" }, timeout: 60_000 });
}

describe("serve checks files, the kernel and the disk", { skip: IS_ROOT && hostTool("unshare") ? false : "needs root and unshare" }, () => {
  test("nsswitch.conf without myhostname: *.localhost would not resolve, so serve stops and says what to add", () => {
    const conf = join(scratch, "nsswitch.conf");
    writeFileSync(conf, readFileSync("/etc/nsswitch.conf", "utf8").replace(/^(hosts:.*?)\bmyhostname\b/m, "$1").replace(/^hosts:.*$/m, (l) => (l.includes("files") ? l : "hosts: files dns")));
    const r = serveIn(`mount --bind '${conf}' /etc/nsswitch.conf`, join(scratch, "data-nss"));
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, /myhostname in \/etc\/nsswitch\.conf: the hosts: line lacks it, so \*\.e2b\.localhost does not resolve/);
    assert.match(r.stderr, /add myhostname to the hosts: line of \/etc\/nsswitch\.conf/);
  });

  test("tini-static not executable: the apt-get line installs tini", () => {
    const fake = join(scratch, "tini-static");
    writeFileSync(fake, "", { mode: 0o644 });
    const r = serveIn(`mount --bind '${fake}' /usr/bin/tini-static`, join(scratch, "data-tini"));
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, /tini-static: \/usr\/bin\/tini-static is missing or not executable/);
    assert.match(r.stderr, /^  apt-get install -y --no-install-recommends tini$/m);
  });

  test("the memory cgroup controller disabled: serve names it", () => {
    const fake = join(scratch, "cgroups");
    writeFileSync(fake, readFileSync("/proc/cgroups", "utf8").replace(/^(memory\s+\d+\s+\d+\s+)1$/m, "${1}0"));
    const r = serveIn(`mount --bind '${fake}' /proc/cgroups`, join(scratch, "data-cg"));
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, /cgroups: the kernel has the memory controller disabled/);
  });

  test("no overlayfs in the kernel: serve names it", () => {
    const fake = join(scratch, "filesystems");
    writeFileSync(fake, readFileSync("/proc/filesystems", "utf8").replace(/^.*\boverlay\n/m, ""));
    const empty = mkdtempSync(join(scratch, "empty-"));
    const moduleDir = join("/lib/modules", release(), "kernel", "fs", "overlayfs");
    const hideModule = existsSync(moduleDir) && readdirSync(moduleDir).length > 0 ? `\nmount --bind '${empty}' '${moduleDir}'` : "";
    const r = serveIn(`mount --bind '${fake}' /proc/filesystems${hideModule}`, join(scratch, "data-ovl"));
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, /overlayfs: the kernel has no overlay filesystem/);
  });

  test("a data dir with too little free space: serve says how much is free and needed", () => {
    const small = join(scratch, "small");
    mkdirSync(small);
    const r = serveIn(`mount -t tmpfs -o size=16m tmpfs '${small}'`, join(small, "data"));
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, new RegExp(`free disk at ${small}/data: the data dir has 0\\.0\\d GiB free; sandboxd needs 1\\.00 GiB`));
  });
});

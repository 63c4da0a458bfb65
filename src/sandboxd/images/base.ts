import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../log.js";
import { execTool, mustExec } from "../host/exec.js";
import { MAPPED_ROOT } from "../host/idmap.js";
import { takeLock } from "./lock.js";
import { findDebianMirror } from "./mirror.js";
import { DebootstrapProgress, describeProgress, runDebootstrap, type BuildProgress } from "./progress.js";
import { shiftOwnership } from "./shift.js";

const SUITE = "bookworm";
/** E2B's base image tools, plus what envd's process API runs (bash, util-linux) and terminfo for PTYs. */
const PACKAGES = [
  "python3", "python-is-python3", "curl", "git", "sudo", "procps", "ca-certificates", "iproute2",
  "bash", "coreutils", "util-linux", "ncurses-base", "ncurses-bin", "less",
];
/** Bump when the finishing steps below change, so that caches built by older code are rebuilt. */
const REVISION = 1;

/** Options of ensureBaseRootfs. */
export interface BaseRootfsOptions {
  /** Where built root filesystems are kept (default /var/cache/sandboxd, env SANDBOXD_CACHE_DIR). */
  cacheDir: string;
  log: Logger;
  /** Debian mirror; default: env SANDBOXD_DEBIAN_MIRROR, then the one this machine's apt uses. */
  mirror?: string;
  /** Called as a build moves (debootstrap's packages, then the finishing steps); not called when the rootfs is cached. */
  onProgress?: (p: BuildProgress) => void;
}

/** The cache key of the current recipe (suite, packages, finishing steps, id mapping). */
export function baseRecipeKey(): string {
  return createHash("sha256").update(JSON.stringify({ SUITE, PACKAGES, REVISION, MAPPED_ROOT })).digest("hex").slice(0, 12);
}

/** Unmounts whatever debootstrap left mounted below `root` (proc, sys), deepest first. */
async function unmountBelow(root: string): Promise<void> {
  const mounts = readFileSync("/proc/self/mounts", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[1]?.replace(/\\040/g, " "))
    .filter((m): m is string => !!m && (m === root || m.startsWith(root + "/")))
    .sort()
    .reverse();
  for (const m of mounts) await execTool("umount", ["-l", m]);
}

/**
 * Reports a build's progress to `onProgress` on every move, and to the log (the terminal of a
 * first start) at each new phase and every 10 percent, so a minutes-long build is visibly alive.
 */
function progressReporter(log: Logger, onProgress?: (p: BuildProgress) => void): (p: BuildProgress) => void {
  let phase = "";
  let tenth = -1;
  return (p) => {
    onProgress?.(p);
    const t = p.percent === undefined ? tenth : Math.floor(p.percent / 10);
    if (p.phase !== phase || t !== tenth) log.info({ phase: p.phase, done: p.done, total: p.total, percent: p.percent }, `building the base template: ${describeProgress(p)}`);
    phase = p.phase;
    tenth = t;
  };
}

/** Runs debootstrap into `root`, with one retry from scratch for a dropped download. */
async function bootstrap(root: string, mirror: string, log: Logger, report: (p: BuildProgress) => void): Promise<void> {
  const args = ["--variant=minbase", `--include=${PACKAGES.join(",")}`, SUITE, root, mirror];
  for (let attempt = 1; ; attempt++) {
    const progress = new DebootstrapProgress();
    report(progress.current());
    const r = await runDebootstrap(args, (line) => {
      const p = progress.line(line);
      if (p) report(p);
    }, 20 * 60_000);
    if (r.code === 0) return;
    await unmountBelow(root);
    let detail = r.stderr.trim().slice(-1500) || r.stdout.trim().slice(-1500);
    try {
      detail += "\n" + readFileSync(join(root, "debootstrap", "debootstrap.log"), "utf8").slice(-1500);
    } catch {
      // debootstrap failed before writing its log
    }
    rmSync(root, { recursive: true, force: true });
    if (attempt >= 2) throw new Error(`debootstrap ${SUITE} from ${mirror} failed: ${detail}`);
    log.warn({ mirror }, "debootstrap failed; retrying once");
  }
}

/** E2B's finishing steps: user `user` with passwordless sudo, a clean apt, no host identity. */
async function finish(root: string): Promise<void> {
  await mustExec("chroot", [root, "useradd", "-m", "-s", "/bin/bash", "user"]);
  writeFileSync(join(root, "etc/sudoers.d/user"), "user ALL=(ALL:ALL) NOPASSWD: ALL\n", { mode: 0o440 });
  await execTool("chroot", [root, "apt-get", "clean"]);
  rmSync(join(root, "var/lib/apt/lists"), { recursive: true, force: true });
  mkdirSync(join(root, "var/lib/apt/lists/partial"), { recursive: true });
  writeFileSync(join(root, "etc/hostname"), "sandbox\n");
  writeFileSync(join(root, "etc/resolv.conf"), "");
  rmSync(join(root, "debootstrap"), { recursive: true, force: true });
}

/** The base rootfs when it is already built in `cacheDir`, else undefined (nothing is built). */
export function cachedBaseRootfs(cacheDir: string): string | undefined {
  const rootfs = join(cacheDir, `base-${SUITE}-${baseRecipeKey()}`, "rootfs");
  return existsSync(rootfs) ? rootfs : undefined;
}

/**
 * Returns the read-only root filesystem of template `base` (Debian bookworm minbase with E2B's
 * base tools and user `user`), its files belonging to the sandboxes' mapped id range. Built once per machine
 * and recipe by debootstrap, atomically (temp dir + rename) under a lock file, so concurrent
 * callers wait for one build instead of racing.
 */
export async function ensureBaseRootfs(opts: BaseRootfsOptions): Promise<string> {
  const dir = join(opts.cacheDir, `base-${SUITE}-${baseRecipeKey()}`);
  const rootfs = join(dir, "rootfs");
  if (cachedBaseRootfs(opts.cacheDir)) {
    chmodSync(dir, 0o700);
    return rootfs;
  }
  mkdirSync(opts.cacheDir, { recursive: true, mode: 0o755 });
  const release = await takeLock(`${dir}.lock`, {
    timeoutMs: 30 * 60_000,
    onWait: () => opts.log.info({ dir }, "waiting for another process building the base rootfs"),
  });
  try {
    if (existsSync(rootfs)) return rootfs;
    const mirror = opts.mirror ?? process.env.SANDBOXD_DEBIAN_MIRROR ?? findDebianMirror();
    const t0 = Date.now();
    opts.log.info({ mirror, dir }, "building the base rootfs (once per machine)");
    const tmp = mkdtempSync(join(opts.cacheDir, ".build-base-"));
    try {
      const root = join(tmp, "rootfs");
      const report = progressReporter(opts.log, opts.onProgress);
      await bootstrap(root, mirror, opts.log, report);
      const tBoot = Date.now();
      await unmountBelow(root);
      report({ phase: "adding user 'user' and cleaning up", percent: 96 });
      await finish(root);
      report({ phase: "mapping file owners to the sandboxes' id range", percent: 98 });
      const files = shiftOwnership(root, MAPPED_ROOT);
      // host root alone reaches it (overlayfs reads a lower layer with the mounter's rights): no
      // host user runs its setuid files, which belong to the sandboxes' root
      chmodSync(tmp, 0o700);
      renameSync(tmp, dir);
      opts.log.info({ dir, debootstrapMs: tBoot - t0, totalMs: Date.now() - t0, files }, "base rootfs built");
    } catch (err) {
      await unmountBelow(tmp);
      rmSync(tmp, { recursive: true, force: true });
      throw err;
    }
    return rootfs;
  } finally {
    release();
  }
}

/** The host check: the tools, kernel features and files sandboxd needs, and the Debian packages that bring them. */
import { accessSync, constants, existsSync, readdirSync, readFileSync, statfsSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { release } from "node:os";
import { cgroupMounts } from "../cgroups.js";
import { assertReachableBySandboxes } from "../reach.js";

/** One thing this host lacks, what it is for, and the Debian package (or the step) that brings it. */
export interface Missing {
  /** The tool, file or kernel feature, as the user would name it. */
  what: string;
  /** Why sandboxd needs it and what was found instead. */
  why: string;
  /** The Debian package that provides it, when one does. */
  pkg?: string;
  /** What to do when no package fixes it. */
  fix?: string;
}

/** What the host check looks at. */
export interface HostCheckOptions {
  dataDir: string;
  cacheDir: string;
  /** The base domain: names under `.localhost` need libnss-myhostname to resolve to this machine. */
  domain: string;
  /** Whether the base template's rootfs is already built (its build needs more free space). */
  baseBuilt: boolean;
  /** The PATH tools are run from (sandboxd spawns them by name); default: this process's. */
  path?: string;
  /** The envd artifact directory sandboxes bind-mount, when one was found. */
  envdDir?: string;
}

/** The exit status of `serve` when the host lacks a prerequisite (the unit does not restart on it). */
export const HOST_UNFIT_EXIT = 3;

/** Free space below this in the data dir or, before the base build, the cache dir stops the start. */
export const MIN_FREE_BYTES = 1024 ** 3;

/** The static tini every sandbox runs as PID 1 (the runtime's default path). */
export const TINI_STATIC = "/usr/bin/tini-static";

/** Tools sandboxd runs by name, the Debian package of each, and what it is used for. */
const TOOLS: { tool: string; pkg: string; use: string }[] = [
  { tool: "runc", pkg: "runc", use: "runs each sandbox" },
  { tool: "nft", pkg: "nftables", use: "sandboxes' firewall and egress rules" },
  { tool: "ip", pkg: "iproute2", use: "each sandbox's network slot" },
  { tool: "openssl", pkg: "openssl", use: "the local CA and TLS certificates" },
  { tool: "debootstrap", pkg: "debootstrap", use: "builds the base template" },
  { tool: "rsync", pkg: "rsync", use: "flattens template layers" },
  { tool: "mkfs.ext4", pkg: "e2fsprogs", use: "formats the golden image sandbox disks are reflinked from" },
  { tool: "mkfs.xfs", pkg: "xfsprogs", use: "makes the copy-on-write storage pool of sandbox disks and snapshots" },
  { tool: "xfs_growfs", pkg: "xfsprogs", use: "grows the storage pool" },
  { tool: "fsfreeze", pkg: "util-linux", use: "holds a sandbox's disk still for a snapshot" },
  { tool: "losetup", pkg: "mount", use: "the storage pool's loop device" },
  { tool: "newuidmap", pkg: "uidmap", use: "user-namespace id ranges" },
  { tool: "nsenter", pkg: "util-linux", use: "runs network setup inside sandboxes" },
  { tool: "mount", pkg: "mount", use: "overlay root filesystems and disks" },
  { tool: "umount", pkg: "mount", use: "overlay root filesystems and disks" },
  { tool: "chroot", pkg: "coreutils", use: "finishes the base template" },
  { tool: "skopeo", pkg: "skopeo", use: "pulls templates' base images from registries" },
  { tool: "umoci", pkg: "umoci", use: "unpacks pulled base images" },
];

/** cgroup controllers the runtime limits sandboxes with. */
const CONTROLLERS = ["cpu", "memory", "pids"];

/** The Debian packages this host needs (what `sandboxd setup` installs). */
export const DEBIAN_PACKAGES = [...new Set([...TOOLS.map((t) => t.pkg), "tini", "libnss-myhostname"])];

/** The executable `tool` on `path`, as spawn would find it; undefined when there is none. */
export function findTool(tool: string, path: string): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    try {
      accessSync(join(dir, tool), constants.X_OK);
      return join(dir, tool);
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

/** Whether `file` is an executable regular file. */
function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The directories glibc loads NSS modules from on Debian (multiarch first). */
function libDirs(): string[] {
  const triple = { x64: "x86_64-linux-gnu", arm64: "aarch64-linux-gnu" }[process.arch as string];
  const multi = triple ? [`/lib/${triple}`, `/usr/lib/${triple}`] : [];
  return [...multi, "/lib64", "/usr/lib64", "/lib", "/usr/lib"];
}

/** The `hosts:` sources of /etc/nsswitch.conf (empty when the file or line is missing). */
function hostsSources(): string[] {
  let text = "";
  try {
    text = readFileSync("/etc/nsswitch.conf", "utf8");
  } catch {
    return [];
  }
  const line = text.split("\n").find((l) => /^\s*hosts\s*:/.test(l));
  return line ? line.replace(/#.*/, "").split(":")[1].trim().split(/\s+/).filter(Boolean) : [];
}

/** Whether the kernel can mount overlayfs: registered now, or as a module it loads on first mount. */
function overlayAvailable(): boolean {
  try {
    if (/\boverlay$/m.test(readFileSync("/proc/filesystems", "utf8"))) return true;
  } catch {
    // no /proc: fall through to the module files
  }
  const dir = join("/lib/modules", release(), "kernel", "fs", "overlayfs");
  try {
    return readdirSync(dir).some((f) => f.startsWith("overlay.ko"));
  } catch {
    return false;
  }
}

/** cgroup controllers /proc/cgroups lists as enabled. */
function enabledControllers(): Set<string> {
  const on = new Set<string>();
  try {
    for (const line of readFileSync("/proc/cgroups", "utf8").split("\n")) {
      const f = line.split(/\s+/);
      if (f.length >= 4 && !f[0].startsWith("#") && f[3] === "1") on.add(f[0]);
    }
  } catch {
    // no /proc/cgroups: every controller counts as missing
  }
  return on;
}

/** `dir`, or its nearest existing parent (the data and cache dirs may not exist yet). */
function existing(dir: string): string {
  let d = dir;
  while (!existsSync(d) && dirname(d) !== d) d = dirname(d);
  return d;
}

/** Bytes free to unprivileged writers at `dir`, or at its nearest existing parent. */
function freeBytes(dir: string): number {
  const s = statfsSync(existing(dir));
  return Number(s.bavail) * Number(s.bsize);
}

/** Why sandbox root cannot reach `path` (a directory of /root's mode 0700 on the way), or undefined. */
function unreachable(path: string, what: string): string | undefined {
  try {
    assertReachableBySandboxes(path, what);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

const gib = (n: number) => `${(n / 1024 ** 3).toFixed(2)} GiB`;

/**
 * Everything this host lacks to run sandboxes: root, the tools sandboxd spawns, the static
 * tini, name resolution of `*.localhost`, cgroup controllers, overlayfs and free disk. Empty
 * when nothing is missing. Reads only; installs nothing.
 */
export function checkHost(opts: HostCheckOptions): Missing[] {
  const missing: Missing[] = [];
  if (process.getuid?.() !== 0) {
    missing.push({ what: "root", why: "sandboxd makes namespaces, cgroups, mounts and firewall rules", fix: "run it as root (sudo)" });
  }
  const path = opts.path ?? process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin";
  for (const t of TOOLS) {
    if (!findTool(t.tool, path)) missing.push({ what: t.tool, why: `not found on PATH (${t.use})`, pkg: t.pkg });
  }
  if (!executable(TINI_STATIC)) missing.push({ what: "tini-static", why: `${TINI_STATIC} is missing or not executable (PID 1 of each sandbox)`, pkg: "tini" });
  if (opts.domain === "localhost" || opts.domain.endsWith(".localhost")) {
    const lib = libDirs().some((d) => existsSync(join(d, "libnss_myhostname.so.2")));
    if (!lib) {
      missing.push({ what: "libnss-myhostname", why: `*.${opts.domain} must resolve to this machine for the SDK`, pkg: "libnss-myhostname" });
    } else if (!hostsSources().includes("myhostname")) {
      missing.push({
        what: "myhostname in /etc/nsswitch.conf",
        why: `the hosts: line lacks it, so *.${opts.domain} does not resolve to this machine`,
        fix: "add myhostname to the hosts: line of /etc/nsswitch.conf (e.g. hosts: files myhostname dns)",
      });
    }
  }
  const controllers = enabledControllers();
  const off = CONTROLLERS.filter((c) => !controllers.has(c));
  if (off.length > 0 || cgroupMounts().length === 0) {
    missing.push({
      what: "cgroups",
      why: off.length > 0 ? `the kernel has the ${off.join(", ")} controller${off.length > 1 ? "s" : ""} disabled (they limit each sandbox)` : "no cgroup filesystem is mounted",
      fix: "boot a kernel with the cpu, memory and pids cgroup controllers enabled, and cgroups mounted at /sys/fs/cgroup",
    });
  }
  if (!overlayAvailable()) {
    missing.push({ what: "overlayfs", why: "the kernel has no overlay filesystem (each sandbox's root is an overlay)", fix: "load the overlay module (modprobe overlay) or use a kernel with CONFIG_OVERLAY_FS" });
  }
  // Sandboxes bind-mount envd and their layers from these paths inside their user namespace, where
  // a host directory grants only its "other" bits: a checkout under /root (0700) fails here.
  const reach: [string, string][] = [["the data dir", join(existing(opts.dataDir), "x")], ...(opts.envdDir ? ([["the envd directory", join(opts.envdDir, "envd")]] as [string, string][]) : [])];
  for (const [what, path] of reach) {
    const why = unreachable(path, what);
    if (why) missing.push({ what: `${what} reachable by sandboxes`, why: why.replace(/; run (chmod .*)$/, ""), fix: /; run (chmod .*)$/.exec(why)?.[1] ?? "choose another location" });
  }
  const disks: [string, string][] = [["data dir", opts.dataDir], ...(opts.baseBuilt ? [] : ([["cache dir", opts.cacheDir]] as [string, string][]))];
  for (const [name, dir] of disks) {
    const free = freeBytes(dir);
    if (free < MIN_FREE_BYTES) {
      missing.push({ what: `free disk at ${dir}`, why: `the ${name} has ${gib(free)} free; sandboxd needs ${gib(MIN_FREE_BYTES)}`, fix: `free space there, or point --${name.replace(" ", "-")} elsewhere` });
    }
  }
  return missing;
}

/** The apt-get line that installs the packages of `missing`; undefined when no package helps. */
export function installLine(missing: Missing[]): string | undefined {
  const pkgs = [...new Set(missing.flatMap((m) => (m.pkg ? [m.pkg] : [])))];
  return pkgs.length > 0 ? `apt-get install -y --no-install-recommends ${pkgs.join(" ")}` : undefined;
}

/** The message `serve` prints before it stops: each missing part, then the install line. */
export function describeMissing(missing: Missing[], self = "sandboxd"): string {
  const lines = ["sandboxd cannot start: this host lacks what it needs to run sandboxes:"];
  for (const m of missing) lines.push(`  - ${m.what}: ${m.why}${m.pkg ? ` [Debian package ${m.pkg}]` : m.fix ? `; ${m.fix}` : ""}`);
  const line = installLine(missing);
  if (line) lines.push("Install the missing packages (as root) with:", `  ${line}`, `or run '${self} setup', which runs that line.`);
  return lines.join("\n") + "\n";
}

import { readFileSync } from "node:fs";
import { ENVD_PORT } from "../envd-client/port.js";
import { MAPPED_RANGE, MAPPED_ROOT } from "../host/idmap.js";
import type { BindMount } from "./identity.js";
import { SANDBOX_OOM_SCORE_ADJ } from "../host/oom.js";
import { seccompProfile } from "./seccomp.js";

/** Where the release envd directory is bind-mounted (read-only) inside the sandbox. */
export const ENVD_MOUNT = "/usr/lib/envd";
/** Where the host's static tini is bind-mounted (read-only) to be the sandbox's PID 1. */
export const TINI_MOUNT = "/usr/lib/sandboxd/tini";

/** What one sandbox's config.json is made from. */
export interface BundleParams {
  sandboxID: string;
  /** Exported to envd, which hands it to every process as E2B_TEMPLATE_ID (what MMDS gives E2B's). */
  templateID?: string;
  /** The mounted overlay (absolute). */
  rootfsDir: string;
  envdDir: string;
  tiniPath: string;
  /** cgroup path relative to each hierarchy's root, e.g. /sandboxd-ab12/i123. */
  cgroupsPath: string;
  cpuCount: number;
  /** Started ahead of need: the smallest CPU share until it is raised. */
  background?: boolean;
  memoryMB: number;
  pidsLimit: number;
  defaultUser: string;
  defaultWorkdir?: string;
  /** Files sandboxd owns, bind-mounted in after the standard mounts (the identity files). */
  extraMounts?: BindMount[];
  /** Namespaces made ahead (a network slot wired before the sandbox): joined by path instead of made by runc. */
  joinNamespaces?: { user: string; network: string };
}


/** The kernel's smallest CPU share (cgroup v1 cpu.shares; runc maps it to cpu.weight 1 on v2). */
const MIN_CPU_SHARES = 2;
/** The CPU share of a sandbox started ahead of need: a quarter of a vCPU's, so it yields to live work without starving on a busy host. */
const BACKGROUND_CPU_SHARES = 256;

/** The CPU share of a sandbox of `cpuCount` vCPUs: 1024 per vCPU, as Docker's --cpus. */
export function cpuShares(cpuCount: number): number {
  return Math.max(MIN_CPU_SHARES, Math.round(1024 * cpuCount));
}

/**
 * Docker's default capability set less CAP_NET_RAW: no NET_ADMIN, no SYS_ADMIN, no SYS_PTRACE, no
 * SYS_TIME, and no raw or packet sockets (their frames would skip the sandbox's own firewall
 * hooks; ping uses ICMP datagram sockets instead, see linux.sysctl).
 */
export const DEFAULT_CAPABILITIES = [
  "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_SETGID",
  "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
];

/** Docker's masked and read-only /proc and /sys paths. */
const MASKED_PATHS = [
  "/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
  "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
];
const READONLY_PATHS = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"];

/**
 * The open-files limit sandboxes get: 65536, or sandboxd's own hard limit when that is lower
 * (raising a hard limit needs CAP_SYS_RESOURCE on the host, which the user namespace lacks).
 */
export function sandboxNofile(): number {
  const m = /^Max open files\s+\S+\s+(\S+)/m.exec(readFileSync("/proc/self/limits", "utf8"));
  const hard = m && m[1] !== "unlimited" ? Number(m[1]) : Infinity;
  return Math.min(65536, hard);
}

/** Quotes a word for the sandbox's /bin/sh. */
function shq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * The command PID 1 (tini, which reaps orphans) runs: envd in a loop, so that an envd that dies
 * (a crash, the OOM killer) comes back; envd keeps its token in its run dir across restarts.
 */
export function envdLoop(p: Pick<BundleParams, "defaultUser" | "defaultWorkdir">): string {
  const flags = [
    "--port", String(ENVD_PORT), "--host", "0.0.0.0", "--clock", "off", "--run-dir", "/run/e2b",
    "--log-level", "info", "--default-user", p.defaultUser,
    ...(p.defaultWorkdir ? ["--default-workdir", p.defaultWorkdir] : []),
  ];
  const cmd = [`${ENVD_MOUNT}/envd`, ...flags].map(shq).join(" ");
  return `while :; do ${cmd}; echo "envd exited with status $?; restarting" >&2; sleep 0.5; done`;
}

/** The OCI runtime config (config.json) of one sandbox. */
export function ociConfig(p: BundleParams): object {
  const memory = p.memoryMB * 1024 * 1024;
  const period = 100_000;
  return {
    ociVersion: "1.0.2",
    process: {
      terminal: false,
      user: { uid: 0, gid: 0 },
      args: [TINI_MOUNT, "--", "/bin/sh", "-c", envdLoop(p)],
      // envd reads the sandbox's identity from its own environment (the stand-in for E2B's MMDS).
      env: [
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "E2B_SANDBOX=true",
        `E2B_SANDBOX_ID=${p.sandboxID}`, ...(p.templateID ? [`E2B_TEMPLATE_ID=${p.templateID}`] : []),
      ],
      cwd: "/",
      capabilities: {
        bounding: DEFAULT_CAPABILITIES,
        effective: DEFAULT_CAPABILITIES,
        permitted: DEFAULT_CAPABILITIES,
      },
      rlimits: [
        { type: "RLIMIT_NOFILE", hard: sandboxNofile(), soft: sandboxNofile() },
        { type: "RLIMIT_CORE", hard: 0, soft: 0 },
      ],
      // sudo inside needs setuid executables to gain privileges (within the user namespace)
      noNewPrivileges: false,
      oomScoreAdj: SANDBOX_OOM_SCORE_ADJ,
    },
    root: { path: p.rootfsDir, readonly: false },
    hostname: p.sandboxID,
    mounts: [
      { destination: "/proc", type: "proc", source: "proc", options: ["nosuid", "noexec", "nodev"] },
      { destination: "/dev", type: "tmpfs", source: "tmpfs", options: ["nosuid", "strictatime", "mode=755", "size=65536k"] },
      { destination: "/dev/pts", type: "devpts", source: "devpts", options: ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"] },
      { destination: "/dev/shm", type: "tmpfs", source: "shm", options: ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"] },
      { destination: "/dev/mqueue", type: "mqueue", source: "mqueue", options: ["nosuid", "noexec", "nodev"] },
      { destination: "/sys", type: "sysfs", source: "sysfs", options: ["nosuid", "noexec", "nodev", "ro"] },
      { destination: "/sys/fs/cgroup", type: "cgroup", source: "cgroup", options: ["nosuid", "noexec", "nodev", "relatime", "ro"] },
      { destination: "/run", type: "tmpfs", source: "tmpfs", options: ["nosuid", "nodev", "mode=755", "size=65536k"] },
      { destination: TINI_MOUNT, type: "bind", source: p.tiniPath, options: ["bind", "ro", "nosuid", "nodev"] },
      { destination: ENVD_MOUNT, type: "bind", source: p.envdDir, options: ["rbind", "ro", "nosuid", "nodev"] },
      ...(p.extraMounts ?? []),
    ],
    linux: {
      uidMappings: [{ containerID: 0, hostID: MAPPED_ROOT, size: MAPPED_RANGE }],
      gidMappings: [{ containerID: 0, hostID: MAPPED_ROOT, size: MAPPED_RANGE }],
      namespaces: [
        { type: "pid" }, { type: "network", path: p.joinNamespaces?.network }, { type: "ipc" }, { type: "uts" }, { type: "mount" }, { type: "cgroup" },
        // runc joins a user namespace given by path first, and writes no id mapping into it (the holder's is the same)
        { type: "user", path: p.joinNamespaces?.user },
      ],
      cgroupsPath: p.cgroupsPath,
      // ICMP datagram sockets for every group inside (the ids the user namespace maps): ping
      // works without CAP_NET_RAW; the setting is the sandbox's own network namespace's
      sysctl: { "net.ipv4.ping_group_range": `0 ${MAPPED_RANGE - 1}` },
      resources: {
        devices: [{ allow: false, access: "rwm" }],
        // memory+swap equal to the limit: no swap on top, so memoryMB is the sandbox's whole
        // footprint, as the host budget counts it
        memory: { limit: memory, swap: memory },
        cpu: { quota: Math.round(p.cpuCount * period), period, shares: p.background ? BACKGROUND_CPU_SHARES : cpuShares(p.cpuCount) },
        pids: { limit: p.pidsLimit },
      },
      maskedPaths: MASKED_PATHS,
      readonlyPaths: READONLY_PATHS,
      seccomp: seccompProfile(),
    },
  };
}

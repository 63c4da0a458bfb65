/**
 * The host's kernel and process limits that cap how many sandboxes can run at once, or how many
 * of them can do one thing at once (watch files), read (never changed: the host's sysctls are its
 * administrator's), each turned into the count of sandboxes it leaves room for; `serve` warns,
 * one line each, about those below what memory allows. The one limit sandboxd sets is its own:
 * its open-files soft limit is raised to the hard.
 *
 * Not listed, because it does not bind: `net.ipv4.neigh.default.gc_thresh3`. Each sandbox adds
 * two neighbour entries (the host's end and its own), both permanent, and the kernel (since 4.19)
 * counts only entries it may collect against gc_thresh3 (test/sandboxd/host/limits-neigh).
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import type { Logger } from "../log.js";
import { memoryAvailableAboveFloorMB } from "./floors.js";
import { MAPPED_RANGE, MAPPED_ROOT } from "./idmap.js";

/** What an idle sandbox costs the host's memory, MiB (bench 13 measures it). */
export const IDLE_SANDBOX_MIB = 16;

/** One limit, what each sandbox needs of it, and how many sandboxes it leaves room for. */
export interface HostLimit {
  /** The sysctl or limit's name, as an administrator sets it (e.g. `fs.inotify.max_user_instances`). */
  name: string;
  /** What it caps: sandboxes running at all, or only those doing what `why` names at the same time. */
  caps: "sandboxes" | "sandboxes watching files";
  value: number;
  /** Already taken now (by the host and sandboxes running), when the kernel tells. */
  used: number;
  /** What one sandbox takes of it. */
  perSandbox: number;
  /** What one sandbox takes of it, in words. */
  why: string;
  /** Sandboxes it leaves room for: (value − used) ÷ perSandbox. */
  capsAt: number;
}

type Read = (path: string) => string | undefined;

const readText: Read = (path) => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
};

function limit(name: string, value: number | undefined, used: number, perSandbox: number, why: string, caps: HostLimit["caps"] = "sandboxes"): HostLimit[] {
  if (value === undefined || !Number.isFinite(value)) return [];
  return [{ name, caps, value, used, perSandbox, why, capsAt: Math.max(0, Math.floor((value - used) / perSandbox)) }];
}

/**
 * inotify instances open now in processes charged to host root: root's own and the sandboxes'
 * (their uids are the mapped range; their user namespaces are owned by root, who made them).
 */
export function rootInotifyInstances(mapped: { base: number; count: number }): number {
  let n = 0;
  for (const pid of safeReaddir("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const uid = Number(/^Uid:\s+(\d+)/m.exec(readText(`/proc/${pid}/status`) ?? "")?.[1] ?? NaN);
    if (uid !== 0 && !(uid >= mapped.base && uid < mapped.base + mapped.count)) continue;
    for (const fd of safeReaddir(`/proc/${pid}/fd`)) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === "anon_inode:inotify") n++;
      } catch {
        // closed meanwhile
      }
    }
  }
  return n;
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

const num = (text: string | undefined): number | undefined => (text === undefined || text.trim() === "" ? undefined : Number(text.trim().split(/\s+/)[0]));

/** sandboxd's own open-files limits (soft, hard) and descriptors open now. */
export function openFiles(read: Read = readText): { soft: number; hard: number; open: number } {
  const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(read("/proc/self/limits") ?? "");
  const n = (s: string | undefined) => (s === undefined || s === "unlimited" ? Infinity : Number(s));
  let open = 0;
  try {
    open = readdirSync("/proc/self/fd").length;
  } catch {
    // no procfs: count nothing
  }
  return { soft: n(m?.[1]), hard: n(m?.[2]), open };
}

/**
 * Raises sandboxd's own RLIMIT_NOFILE soft limit to its hard limit (Node has no setrlimit: the
 * util-linux `prlimit` tool sets it on this process). Returns the soft limit now.
 */
export function raiseOpenFiles(log: Logger): number {
  const { soft, hard } = openFiles();
  if (!(hard > soft) || !Number.isFinite(hard)) return soft;
  try {
    execFileSync("prlimit", ["--pid", String(process.pid), `--nofile=${hard}:${hard}`], { stdio: "ignore" });
  } catch (err) {
    log.warn({ soft, hard, err: (err as Error).message }, "could not raise sandboxd's open-files soft limit to its hard limit");
    return soft;
  }
  const now = openFiles().soft;
  log.info({ from: soft, to: now }, "raised sandboxd's open-files soft limit to its hard limit");
  return now;
}

/** Loop devices the kernel may still make: unbounded unless `max_loop=` was given at boot. */
function loopLimit(read: Read): HostLimit[] {
  const m = /(?:^|\s)(?:loop\.)?max_loop=(\d+)/.exec(read("/proc/cmdline") ?? "");
  if (!m) return [];
  let used = 0;
  try {
    used = readdirSync("/sys/block").filter((d) => d.startsWith("loop") && read(`/sys/block/${d}/loop/backing_file`) !== undefined).length;
  } catch {
    // no sysfs: count nothing
  }
  return limit("max_loop (kernel command line)", Number(m[1]), used, 1, "each sandbox's disk is a loop device");
}

/**
 * Every limit this host has that sandboxes draw on, as read now. `inotifyInUse` counts the
 * inotify instances already charged to root (a walk of /proc; tests pass their own).
 */
export function hostLimits(read: Read = readText, inotifyInUse = () => rootInotifyInstances({ base: MAPPED_ROOT, count: MAPPED_RANGE })): HostLimit[] {
  const sys = (name: string) => num(read(`/proc/sys/${name.replace(/\./g, "/")}`));
  const tasks = Number(/^\S+ \S+ \S+ \d+\/(\d+)/.exec(read("/proc/loadavg") ?? "")?.[1] ?? 0);
  const files = openFiles(read);
  const fileNr = num(read("/proc/sys/fs/file-nr")) ?? 0;
  const inotify = sys("fs.inotify.max_user_instances");
  return [
    ...limit("fs.inotify.max_user_instances", inotify, inotify === undefined ? 0 : inotifyInUse(), 1,
      "an idle sandbox holds no inotify instance, but each that watches files (the SDK's watchDir, a dev server's watcher) takes one or more (envd up to 16), and the kernel charges every sandbox's instances to root, the owner of their user namespaces, together with root's own", "sandboxes watching files"),
    ...limit("kernel.pid_max", sys("kernel.pid_max"), tasks, 10, "an idle sandbox runs 9 tasks (its init, a shell, envd's 7 threads), more with its commands"),
    ...limit("kernel.threads-max", sys("kernel.threads-max"), tasks, 10, "an idle sandbox runs 9 tasks, more with its commands"),
    ...limit("user.max_user_namespaces", sys("user.max_user_namespaces"), 0, 1, "each sandbox is a user namespace of its own, counted against root, who makes it"),
    ...limit("RLIMIT_NOFILE of sandboxd (soft)", files.soft, files.open, 4, "sandboxd holds a few descriptors per sandbox (metrics connection, proxied connections, console)"),
    ...limit("fs.file-max", sys("fs.file-max"), fileNr, 64, "a sandbox's processes and sandboxd's share for it hold open files"),
    ...limit("net.netfilter.nf_conntrack_max", sys("net.netfilter.nf_conntrack_max"), sys("net.netfilter.nf_conntrack_count") ?? 0, 32, "each sandbox's connections are tracked for its NAT and firewall"),
    ...loopLimit(read),
  ];
}

/** How many idle sandboxes the memory allows: the memory budget, or else the memory above the host's floor, over an idle sandbox's cost. */
export function sandboxesMemoryAllows(memoryBudgetMB: number | undefined, availableAboveFloorMB = memoryAvailableAboveFloorMB): number {
  return Math.max(0, Math.floor((memoryBudgetMB ?? availableAboveFloorMB()) / IDLE_SANDBOX_MIB));
}

/** One warning line per limit that caps the sandboxes below what memory allows. */
export function limitWarnings(limits: readonly HostLimit[], memoryAllows: number): string[] {
  return limits
    .filter((l) => l.capsAt < memoryAllows)
    .map((l) =>
      l.caps === "sandboxes"
        ? `host limit ${l.name} = ${l.value} (${l.used} in use) caps the sandbox budget at ${l.capsAt} sandboxes, below the ${memoryAllows} its memory allows: ${l.why} (${l.perSandbox} each); raise it to run more`
        : `host limit ${l.name} = ${l.value} (${l.used} in use) lets at most ${l.capsAt} of the ${memoryAllows} sandboxes its memory allows watch files at once (it does not cap how many run): ${l.why}; raise it for more`);
}

/** At `serve` start: raises the open-files soft limit, then warns about every host limit that caps sandboxes below what memory allows. */
export function checkHostLimits(memoryBudgetMB: number | undefined, log: Logger): void {
  raiseOpenFiles(log);
  const allows = sandboxesMemoryAllows(memoryBudgetMB);
  const limits = hostLimits();
  for (const l of limits) {
    if (l.capsAt >= allows) continue;
    log.warn({ limit: l.name, value: l.value, inUse: l.used, caps: l.caps, capsAt: l.capsAt, memoryAllows: allows }, limitWarnings([l], allows)[0]);
  }
}

/**
 * Host figures the density scenario reads at each count of idle sandboxes: memory and CPU charged
 * to one sandboxd instance's sandbox cgroups (v1 or v2), their tasks, the kernel keys of their host
 * uid, a process's CPU with and without its children, and the sysctls that bound how many
 * sandboxes a host runs, with what is in use of the kernel-wide ones.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { MAPPED_ROOT } from "../../src/sandboxd/host/idmap.js";
import { instanceKey } from "../../src/sandboxd/host/instance.js";

/** The sysctls the scenario publishes, as an administrator names them. */
export const SYSCTLS = [
  "fs.inotify.max_user_instances", "fs.inotify.max_user_watches", "net.ipv4.neigh.default.gc_thresh3", "kernel.pid_max",
  "kernel.threads-max", "fs.file-max", "net.netfilter.nf_conntrack_max", "kernel.keys.maxkeys", "user.max_user_namespaces",
] as const;

const read = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
};

const first = (text: string | undefined): number => (text === undefined ? NaN : Number(text.trim().split(/\s+/)[0]));

/** Each sysctl of SYSCTLS and its value now (NaN when this kernel has none). */
export function sysctls(): Record<string, number> {
  return Object.fromEntries(SYSCTLS.map((n) => [n, first(read(`/proc/sys/${n.replace(/\./g, "/")}`))]));
}

/** Kernel-wide use of what those sysctls bound: neighbour entries (every netns, permanent ones included), tracked connections, open files, tasks. */
export function kernelUse(): { neighbours: number; conntrack: number; files: number; tasks: number } {
  const arp = read("/proc/net/stat/arp_cache")?.split("\n")[1]?.trim().split(/\s+/)[0];
  return {
    neighbours: arp ? parseInt(arp, 16) : NaN,
    conntrack: first(read("/proc/sys/net/netfilter/nf_conntrack_count")),
    files: first(read("/proc/sys/fs/file-nr")),
    tasks: Number(/^\S+ \S+ \S+ \d+\/(\d+)/.exec(read("/proc/loadavg") ?? "")?.[1] ?? NaN),
  };
}

/** The instance's parent cgroup in a v1 controller's hierarchy, or in the v2 one when `controller` is undefined. */
const parentDir = (dataDir: string, controller?: string) => join("/sys/fs/cgroup", controller ?? "", `sandboxd-${instanceKey(dataDir)}`);

/** CPU time of all the instance's sandboxes so far (cgroup v1 cpuacct or v2 cpu.stat), seconds. */
export function sandboxesCpuSeconds(dataDir: string): number {
  const v1 = read(join(parentDir(dataDir, "cpuacct"), "cpuacct.usage"));
  if (v1 !== undefined) return Number(v1) / 1e9;
  const m = /^usage_usec (\d+)$/m.exec(read(join(parentDir(dataDir), "cpu.stat")) ?? "");
  return m ? Number(m[1]) / 1e6 : NaN;
}

/** Tasks (processes and threads) in the instance's sandboxes now. */
export function sandboxTasks(dataDir: string): number {
  return first(read(join(parentDir(dataDir, "pids"), "pids.current")) ?? read(join(parentDir(dataDir), "pids.current")));
}

/** Memory charged to each sandbox's cgroup (cgroup v1 or v2), MiB. */
export function cgroupMiBs(dataDir: string): number[] {
  for (const [dir, file] of [[parentDir(dataDir, "memory"), "memory.usage_in_bytes"], [parentDir(dataDir), "memory.current"]]) {
    try {
      return readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => Number(readFileSync(join(dir, d.name, file), "utf8")) / 2 ** 20);
    } catch {
      // not this hierarchy
    }
  }
  return [];
}

/** Kernel keys held by the sandboxes' host uid and that uid's quota (/proc/key-users). */
export function sandboxKeys(): { keys: number; quota: number } {
  const line = (read("/proc/key-users") ?? "").split("\n").find((l) => l.trim().startsWith(`${MAPPED_ROOT}:`));
  const m = line ? /\s(\d+)\/(\d+)\s+\d+\/\d+\s*$/.exec(line) : null;
  return m ? { keys: Number(m[1]), quota: Number(m[2]) } : { keys: 0, quota: first(read("/proc/sys/kernel/keys/maxkeys")) };
}

/** CPU seconds of `pid` so far: its own (user + system), and its waited-for children's (the tools it ran). */
export function processCpu(pid: number): { self: number; children: number } {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = text.slice(text.lastIndexOf(")") + 2).split(" ").map(Number);
  // utime, stime, cutime, cstime are the 14th to 17th fields overall
  return { self: (f[11] + f[12]) / 100, children: (f[13] + f[14]) / 100 };
}

/** A counter of sandboxd's Prometheus text (summed over its label sets), NaN when absent. */
export function promCounter(text: string, name: string): number {
  let sum = NaN;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "gm"))) sum = (Number.isNaN(sum) ? 0 : sum) + Number(m[1]);
  return sum;
}

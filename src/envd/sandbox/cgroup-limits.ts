// The sandbox's cgroup limits and usage, for /metrics.
import { readFileSync } from "node:fs";
import { join } from "node:path";

// Read synchronously: cgroup files are the kernel's own (no disk behind them, microseconds each),
// and an asynchronous read would start libuv's thread pool in an idle daemon (+1.7 MiB RSS).

/**
 * What envd's own cgroup allows and has used, as a container shows it (cgroup namespace:
 * /sys/fs/cgroup is the sandbox's own). Each field is undefined where the cgroup sets no limit
 * or the file is missing, so a VM (no limit) keeps the machine's figures.
 */
export interface CgroupView {
  /** Memory limit in bytes. */
  memLimit?: number;
  /** Memory charged now (page cache included), bytes. */
  memUsage?: number;
  /** Page cache within that charge, bytes. */
  memCache?: number;
  /** CPU quota in CPUs (quota ÷ period). */
  cpus?: number;
  /** CPU time used by the cgroup, nanoseconds. */
  cpuUsageNs?: number;
}

/** A limit at or above this is "no limit" (cgroup v1 writes 2^63 rounded down to a page). */
const UNLIMITED = 2 ** 62;

function text(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

function num(file: string): number | undefined {
  const t = text(file)?.trim();
  if (t === undefined || t === "" || t === "max") return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : undefined;
}

/** A `key value` line's value from a stat file. */
function statValue(stat: string | undefined, key: string): number | undefined {
  const m = stat && new RegExp(`^${key} (\\d+)$`, "m").exec(stat);
  return m ? Number(m[1]) : undefined;
}

function v2(root: string): CgroupView {
  const [memMax, memCurrent, memStat, cpuMax, cpuStat] = [
    num(join(root, "memory.max")), num(join(root, "memory.current")), text(join(root, "memory.stat")), text(join(root, "cpu.max")), text(join(root, "cpu.stat")),
  ];
  const [quota, period] = (cpuMax ?? "").trim().split(/\s+/);
  const usageUs = statValue(cpuStat, "usage_usec");
  return {
    memLimit: memMax !== undefined && memMax < UNLIMITED ? memMax : undefined,
    memUsage: memCurrent,
    memCache: statValue(memStat, "file"),
    cpus: quota && quota !== "max" && Number(period) > 0 ? Number(quota) / Number(period) : undefined,
    cpuUsageNs: usageUs === undefined ? undefined : usageUs * 1000,
  };
}

function v1(root: string): CgroupView {
  const cpuDir = (name: string) => (text(join(root, name, "cpu.cfs_period_us")) !== undefined || text(join(root, name, "cpuacct.usage")) !== undefined ? join(root, name) : undefined);
  const cpu = cpuDir("cpu") ?? cpuDir("cpu,cpuacct");
  const acct = cpuDir("cpuacct") ?? cpu;
  const mem = join(root, "memory");
  const [limit, usage, stat, quota, period, usageNs] = [
    num(join(mem, "memory.limit_in_bytes")), num(join(mem, "memory.usage_in_bytes")), text(join(mem, "memory.stat")),
    cpu ? num(join(cpu, "cpu.cfs_quota_us")) : undefined, cpu ? num(join(cpu, "cpu.cfs_period_us")) : undefined, acct ? num(join(acct, "cpuacct.usage")) : undefined,
  ];
  return {
    memLimit: limit !== undefined && limit < UNLIMITED ? limit : undefined,
    memUsage: usage,
    memCache: statValue(stat, "total_cache") ?? statValue(stat, "cache"),
    cpus: quota !== undefined && quota > 0 && period !== undefined && period > 0 ? quota / period : undefined,
    cpuUsageNs: usageNs,
  };
}

/** Reads the cgroup view under `root` (v2 when it has cgroup.controllers, else the v1 controllers). */
export function readCgroup(root = "/sys/fs/cgroup"): CgroupView {
  return text(join(root, "cgroup.controllers")) !== undefined ? v2(root) : v1(root);
}

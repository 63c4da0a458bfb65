// GET /metrics: CPU, memory and disk of the sandbox, sampled.
import { readFileSync, statfsSync } from "node:fs";
import { availableParallelism } from "node:os";
import { readCgroup } from "./cgroup-limits.js";

/** The /metrics body, with the reference's field names and meanings. */
export interface Metrics {
  ts: number;
  cpu_count: number;
  cpu_used_pct: number;
  mem_total: number;
  mem_used: number;
  mem_cache: number;
  mem_total_mib: number;
  mem_used_mib: number;
  disk_total: number;
  disk_used: number;
}

interface CpuSample {
  busy: number;
  total: number;
}

/** Parses the aggregate `cpu` line of /proc/stat; busy = total − idle − iowait. */
export function parseCpu(stat: string): CpuSample {
  const line = stat.split("\n").find((l) => l.startsWith("cpu "));
  if (!line) throw new Error("no aggregate cpu line in /proc/stat");
  // user nice system idle iowait irq softirq steal (guest fields are already inside user/nice)
  const f = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - f[3] - f[4], total };
}

/** Parses /proc/meminfo into bytes per key. */
export function parseMeminfo(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^(\w+(?:\(\w+\))?):\s+(\d+)(?:\s+kB)?/.exec(line);
    if (m) out.set(m[1], Number(m[2]) * (line.includes("kB") ? 1024 : 1));
  }
  return out;
}

/**
 * Samples metrics from /proc and statfs, keeping the previous CPU sample for the next delta. In
 * a container whose cgroup sets limits below the machine's (a sandboxd sandbox), memory and CPU
 * are the cgroup's: its memory limit is the total, its CPU quota the CPU count, and CPU use is
 * its own CPU time over that quota.
 */
export class MetricsSampler {
  private prev: CpuSample | undefined;
  private prevCgroup: { usageNs: number; at: bigint } | undefined;

  constructor(
    private readonly diskPath = "/",
    private readonly cgroupRoot = "/sys/fs/cgroup",
  ) {}

  /** Takes the start-up CPU sample so the first /metrics has a window to compare with. */
  prime(): void {
    this.prev = parseCpu(readFileSync("/proc/stat", "utf8"));
    const cg = readCgroup(this.cgroupRoot);
    if (cg.cpuUsageNs !== undefined) this.prevCgroup = { usageNs: cg.cpuUsageNs, at: process.hrtime.bigint() };
  }

  /**
   * One /metrics answer; CPU % covers the time since the previous call. Read synchronously: /proc,
   * the cgroup files and the root filesystem's statfs answer from memory in microseconds, and the
   * host polls this every few seconds, so an idle daemon never starts libuv's thread pool for it.
   */
  sample(): Metrics {
    const [stat, meminfo, fs, cg] = [readFileSync("/proc/stat", "utf8"), readFileSync("/proc/meminfo", "utf8"), statfsSync(this.diskPath), readCgroup(this.cgroupRoot)];
    const cpu = parseCpu(stat);
    const prev = this.prev ?? cpu;
    this.prev = cpu;
    const dt = cpu.total - prev.total;
    let pct = dt > 0 ? Math.min(100, Math.max(0, ((cpu.busy - prev.busy) / dt) * 100)) : 0;
    let cpuCount = availableParallelism();
    if (cg.cpus !== undefined && cg.cpus < cpuCount) {
      cpuCount = Math.max(1, Math.ceil(cg.cpus));
      pct = this.cgroupCpuPct(cg.cpuUsageNs, cg.cpus) ?? pct;
    }
    const mem = parseMeminfo(meminfo);
    const get = (k: string) => mem.get(k) ?? 0;
    let cache = get("Cached") + get("SReclaimable");
    let total = get("MemTotal");
    let used = total - get("MemFree") - get("Buffers") - cache;
    if (cg.memLimit !== undefined && cg.memLimit < total && cg.memUsage !== undefined) {
      total = cg.memLimit;
      cache = Math.min(cg.memCache ?? 0, cg.memUsage);
      used = Math.max(0, cg.memUsage - cache);
    }
    return {
      ts: Math.floor(Date.now() / 1000),
      cpu_count: cpuCount,
      cpu_used_pct: pct > 0 ? Math.round(pct * 100) / 100 : 0,
      mem_total: total,
      mem_used: used,
      mem_cache: cache,
      mem_total_mib: Math.floor(total / 1048576),
      mem_used_mib: Math.floor(used / 1048576),
      disk_total: fs.blocks * fs.bsize,
      disk_used: (fs.blocks - fs.bavail) * fs.bsize,
    };
  }

  /** The cgroup's CPU time since the last sample over its quota's worth of wall time, in %. */
  private cgroupCpuPct(usageNs: number | undefined, cpus: number): number | undefined {
    if (usageNs === undefined) return undefined;
    const at = process.hrtime.bigint();
    const prev = this.prevCgroup;
    this.prevCgroup = { usageNs, at };
    if (!prev || at <= prev.at) return undefined;
    const pct = ((usageNs - prev.usageNs) / (Number(at - prev.at) * cpus)) * 100;
    return Math.min(100, Math.max(0, Math.round(pct * 100) / 100));
  }
}

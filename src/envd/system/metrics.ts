import { readFile, statfs } from "node:fs/promises";
import { availableParallelism } from "node:os";

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

/** Samples host metrics from /proc and statfs, keeping the previous CPU sample for the next delta. */
export class MetricsSampler {
  private prev: CpuSample | undefined;

  constructor(private readonly diskPath = "/") {}

  /** Takes the start-up CPU sample so the first /metrics has a window to compare with. */
  async prime(): Promise<void> {
    this.prev = parseCpu(await readFile("/proc/stat", "utf8"));
  }

  /** One /metrics answer; CPU % covers the time since the previous call. */
  async sample(): Promise<Metrics> {
    const [stat, meminfo, fs] = await Promise.all([readFile("/proc/stat", "utf8"), readFile("/proc/meminfo", "utf8"), statfs(this.diskPath)]);
    const cpu = parseCpu(stat);
    const prev = this.prev ?? cpu;
    this.prev = cpu;
    const dt = cpu.total - prev.total;
    const pct = dt > 0 ? Math.min(100, Math.max(0, ((cpu.busy - prev.busy) / dt) * 100)) : 0;
    const mem = parseMeminfo(meminfo);
    const get = (k: string) => mem.get(k) ?? 0;
    const cache = get("Cached") + get("SReclaimable");
    const total = get("MemTotal");
    const used = total - get("MemFree") - get("Buffers") - cache;
    return {
      ts: Math.floor(Date.now() / 1000),
      cpu_count: availableParallelism(),
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
}

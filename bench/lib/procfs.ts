import { readFileSync, writeFileSync } from "node:fs";

/**
 * CPU time of the whole machine from /proc/stat, in seconds (all cores): busy, total, and steal
 * (time the hypervisor ran someone else while this VM's vCPUs wanted to run).
 */
export function machineCpu(): { busy: number; total: number; steal: number } {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0];
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already in user)
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = f[3] + f[4];
  const hz = 100;
  return { busy: (total - idle) / hz, total: total / hz, steal: f[7] / hz };
}

/** The share of the machine's CPU time (0–1) stolen by the hypervisor between two readings. */
export function stealShare(a: ReturnType<typeof machineCpu>, b: ReturnType<typeof machineCpu>): number {
  return b.total > a.total ? (b.steal - a.steal) / (b.total - a.total) : 0;
}

/** Memory figures of a process from /proc/<pid>/status, in bytes. */
export interface MemStatus {
  rss: number;
  hwm: number;
}

/** Reads VmRSS and VmHWM of `pid` (bytes); throws if the process is gone. */
export function memStatus(pid: number): MemStatus {
  const text = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN) * 1024;
  return { rss: kb("VmRSS"), hwm: kb("VmHWM") };
}

/** Resets VmHWM to the current RSS (Linux ≥ 4.0, needs permission on the process); false if refused. */
export function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}

/**
 * Samples a process's RSS every `intervalMs` and keeps the peak, as a cross-check of VmHWM
 * (and the only peak when clear_refs is refused).
 */
export class RssSampler {
  private timer: NodeJS.Timeout | undefined;
  /** RSS when sampling began, bytes. */
  readonly start: number;
  /** Highest RSS seen so far, bytes. */
  peak: number;

  constructor(
    private readonly pid: number,
    intervalMs = 50,
  ) {
    this.start = memStatus(pid).rss;
    this.peak = this.start;
    this.timer = setInterval(() => this.sample(), intervalMs);
  }

  /** Takes one sample now. */
  sample(): void {
    try {
      this.peak = Math.max(this.peak, memStatus(this.pid).rss);
    } catch {
      // process gone: keep what we have
    }
  }

  /** Stops sampling; returns peak growth over the starting RSS, bytes. */
  stop(): number {
    this.sample();
    clearInterval(this.timer);
    return this.peak - this.start;
  }
}

/**
 * Measures a process's peak RSS growth over the run of `fn`: VmHWM after a reset when the
 * kernel allows it, else the sampled peak; returns growth in bytes plus fn's value.
 */
export async function peakGrowth<T>(pid: number, fn: () => Promise<T>): Promise<{ growth: number; value: T }> {
  const reset = resetPeak(pid);
  const sampler = new RssSampler(pid);
  let value: T;
  try {
    value = await fn();
  } finally {
    sampler.sample();
  }
  const sampled = sampler.stop();
  let growth = sampled;
  if (reset) {
    try {
      growth = Math.max(sampled, memStatus(pid).hwm - sampler.start);
    } catch {
      // process gone
    }
  }
  return { growth, value };
}

/** User+system CPU seconds consumed so far by `pid` (from /proc/<pid>/stat). */
export function cpuSeconds(pid: number): number {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the parenthesised command name; utime and stime are the 14th and 15th fields overall.
  const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(rest[11]) + Number(rest[12]);
  return ticks / 100;
}

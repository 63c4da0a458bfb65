import { execFileSync } from "node:child_process";
import os from "node:os";

/** Where the numbers came from: CPU, memory, kernel, Node, commit. */
export interface Machine {
  cpuModel: string;
  cpus: number;
  memGiB: number;
  kernel: string;
  node: string;
  commit: string;
  date: string;
  /** 1-minute load average when the run started and when it ended (other work on the machine). */
  load: { start: number; end?: number };
}

/** Describes the machine and the checked-out commit. */
export function machine(root: string): Machine {
  let commit = "unknown";
  try {
    commit = execFileSync("git", ["-C", root, "rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["-C", root, "status", "--porcelain", "--untracked-files=no"], { encoding: "utf8" }).trim();
    if (dirty) commit += "+dirty";
  } catch {
    // not a git checkout
  }
  return {
    cpuModel: os.cpus()[0]?.model ?? "unknown",
    cpus: os.availableParallelism(),
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    commit,
    date: new Date().toISOString(),
    load: { start: os.loadavg()[0] },
  };
}

/** One-line description for the table header and README. */
export function describe(m: Machine): string {
  const load = `load ${m.load.start.toFixed(1)}${m.load.end === undefined ? "" : ` → ${m.load.end.toFixed(1)}`}`;
  return `${m.cpus} × ${m.cpuModel}, ${m.memGiB} GiB RAM, ${m.kernel}, Node ${m.node}, commit ${m.commit}, ${m.date}, ${load}`;
}

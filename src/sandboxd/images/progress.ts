import { spawn } from "node:child_process";
import type { ExecResult } from "../host/exec.js";

/** Where a base build is: a phase, steps done (of a total when known) and an overall percent when it can be estimated. */
export interface BuildProgress {
  phase: string;
  done?: number;
  total?: number;
  percent?: number;
}

/** The progress as one line for people: "configuring packages 80/150, 62%". */
export function describeProgress(p: BuildProgress): string {
  const steps = p.done === undefined ? "" : p.total === undefined ? ` (${p.done} so far)` : ` ${p.done}/${p.total}`;
  return `${p.phase}${steps}${p.percent === undefined ? "" : `, ${p.percent}%`}`;
}

/**
 * Reads debootstrap's `I:` lines (one per package retrieved, unpacked and configured) into
 * progress. The package count is known once downloads end; from then on the percent counts
 * unpacks and configures against it (downloads are the first 40%, the steps after debootstrap the last 5%).
 */
export class DebootstrapProgress {
  private retrieved = 0;
  private unpacked = 0;
  private configured = 0;
  private phase = "fetching package lists";

  /** Feeds one line of debootstrap's stdout; returns the new progress when the line moved it. */
  line(text: string): BuildProgress | undefined {
    const m = /^I: (Retrieving|Validating|Extracting|Unpacking|Configuring|Installing core|Base system installed)\b\s*(\S*)/.exec(text);
    if (!m) return undefined;
    const [, what, name] = m;
    if (what === "Retrieving") {
      if (/^(InRelease|Release|Packages)$/.test(name)) return undefined;
      this.retrieved++;
      this.phase = "downloading packages";
    } else if (what === "Extracting" || what === "Installing core") {
      this.phase = "extracting packages";
    } else if (what === "Unpacking") {
      if (!name.endsWith("...") || /^(required|the)$/.test(name)) return undefined;
      this.unpacked++;
      this.phase = "unpacking packages";
    } else if (what === "Configuring") {
      if (!name.endsWith("...") || /^(required|the)$/.test(name)) return undefined;
      this.configured++;
      this.phase = "configuring packages";
    } else if (what === "Base system installed") {
      return { phase: "packages installed", percent: 95 };
    } else {
      return undefined;
    }
    return this.current();
  }

  /** The progress now. */
  current(): BuildProgress {
    if (this.phase === "fetching package lists") return { phase: this.phase, percent: 0 };
    if (this.phase === "downloading packages") return { phase: this.phase, done: this.retrieved };
    const n = this.retrieved;
    const percent = n > 0 ? Math.min(95, 40 + Math.floor((55 * (this.unpacked + this.configured)) / (2 * n))) : undefined;
    if (this.phase === "extracting packages") return { phase: this.phase, percent };
    const done = this.phase === "unpacking packages" ? this.unpacked : this.configured;
    return { phase: this.phase, done: Math.min(done, n), total: n, percent };
  }
}

/** Runs debootstrap with `args`, calling `onLine` per stdout line; never rejects unless it cannot start. */
export function runDebootstrap(args: string[], onLine: (line: string) => void, timeoutMs: number): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const child = spawn("debootstrap", args, { stdio: ["ignore", "pipe", "pipe"], timeout: timeoutMs });
    let stdout = "";
    let stderr = "";
    let partial = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout = (stdout + d).slice(-64_000);
      const lines = (partial + d).split("\n");
      partial = lines.pop() ?? "";
      for (const l of lines) onLine(l);
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-64_000)));
    child.once("error", (err: NodeJS.ErrnoException) => reject(err.code === "ENOENT" ? new Error("debootstrap is not installed (apt-get install debootstrap)") : err));
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

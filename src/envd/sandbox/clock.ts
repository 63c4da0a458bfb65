// The sandbox clock: reading it, and stepping it to the host's time when /init finds drift.
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { promisify } from "node:util";
import type { ClockMode } from "../config.js";

const run = promisify(execFile);

/** The clock /init reads and steps. */
export interface Clock {
  /** Current time in nanoseconds since the epoch. */
  nowNs(): bigint;
  /** Steps the clock to `ns`. */
  set(ns: bigint): Promise<void>;
}

/** Real-time clock; stepping it runs `date -s` (root only, rare: only when /init finds drift). */
class SystemClock implements Clock {
  nowNs(): bigint {
    return BigInt(Date.now()) * 1_000_000n;
  }

  async set(ns: bigint): Promise<void> {
    const sec = ns / 1_000_000_000n;
    const frac = (ns % 1_000_000_000n).toString().padStart(9, "0");
    await run("date", ["-u", "-s", `@${sec}.${frac}`]);
  }
}

/** A fake clock kept in a file (nanoseconds as text), so tests never touch the machine's clock. */
class FileClock implements Clock {
  constructor(private readonly path: string) {}

  nowNs(): bigint {
    try {
      return BigInt(readFileSync(this.path, "utf8").trim());
    } catch {
      return BigInt(Date.now()) * 1_000_000n;
    }
  }

  async set(ns: bigint): Promise<void> {
    writeFileSync(this.path, ns.toString() + "\n");
  }
}

/** A clock that reports real time and never steps. */
class FrozenClock extends SystemClock {
  override async set(): Promise<void> {}
}

/** Builds the clock the config asks for. */
export function createClock(mode: ClockMode): Clock {
  if (mode.kind === "file") return new FileClock(mode.path);
  if (mode.kind === "off") return new FrozenClock();
  return new SystemClock();
}

/** Whether /init should step the clock: more than 50 ms behind or more than 5 s ahead of the host. */
export function needsStep(sandboxNs: bigint, hostNs: bigint): boolean {
  const diff = sandboxNs - hostNs;
  return diff < -50_000_000n || diff > 5_000_000_000n;
}

/** Parses an RFC 3339 timestamp keeping nanoseconds; undefined when malformed. */
export function parseRfc3339Ns(text: string): bigint | undefined {
  const m = /^(\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/.exec(text);
  if (!m) return undefined;
  const ms = Date.parse(`${m[1].replace(/[t ]/, "T")}${m[3].toUpperCase()}`);
  if (Number.isNaN(ms)) return undefined;
  const frac = BigInt((m[2] ?? "").padEnd(9, "0"));
  return BigInt(ms) * 1_000_000n + frac;
}

/** System tools run from sandboxd: without a shell, with bounded output, optionally niced. */
import { spawnTool } from "./spawner.js";

/** What a finished command printed and how it ended. */
export interface ExecResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Options of one command run. */
export interface ExecOptions {
  /** Written to the command's stdin, then closed. */
  input?: string;
  timeoutMs?: number;
  cwd?: string;
  /** Runs the tool at this niceness: work done ahead of need yields the CPU. */
  nice?: number;
}

/**
 * Runs a system tool to completion without a shell, started from a worker thread (see spawner.ts);
 * never rejects unless the tool cannot be started.
 */
export function execTool(cmd: string, args: string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return spawnTool({ cmd, args, cwd: opts.cwd, input: opts.input ?? "", timeoutMs: opts.timeoutMs ?? 60_000, nice: opts.nice });
}

/** Runs a system tool and rejects with its stderr when it exits non-zero. */
export async function mustExec(cmd: string, args: string[], opts: ExecOptions = {}): Promise<string> {
  const r = await execTool(cmd, args, opts);
  if (r.code !== 0) {
    const why = (r.stderr.trim() || r.stdout.trim() || `exit ${r.code ?? "by signal"}`).slice(-2000);
    throw new Error(`${cmd} ${args.slice(0, 4).join(" ")} failed: ${why}`);
  }
  return r.stdout;
}

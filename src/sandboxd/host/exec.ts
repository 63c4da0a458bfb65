/** System tools run from sandboxd: without a shell, with bounded output, optionally niced. */
import { spawn } from "node:child_process";

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
  /** Runs the tool at this niceness (`nice -n`): work done ahead of need yields the CPU. */
  nice?: number;
}

/** Runs a system tool to completion without a shell; never rejects unless the tool cannot be started. */
export function execTool(cmd: string, args: string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const argv = opts.nice ? ["-n", String(opts.nice), cmd, ...args] : args;
    const child = spawn(opts.nice ? "nice" : cmd, argv, { cwd: opts.cwd, stdio: ["pipe", "pipe", "pipe"], timeout: opts.timeoutMs ?? 60_000 });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout = (stdout + d).slice(-1_000_000)));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-64_000)));
    child.once("error", (err: NodeJS.ErrnoException) => {
      reject(err.code === "ENOENT" ? new Error(`${cmd} is not installed (see the runtime's Debian packages)`) : err);
    });
    child.once("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.on("error", () => {
      // the tool exited before reading its input; its exit status tells why
    });
    child.stdin.end(opts.input ?? "");
  });
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

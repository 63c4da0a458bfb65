// The throughput baseline: a command's stdout pipe read to EOF by Node. Read in a fresh Node
// process of its own (like the daemon), so the bench process's heap, grown by the clients of
// earlier runs, does not sway the baseline: Node gives every pipe read a new 64 KiB Buffer, so
// the reader's garbage collections are part of it. Read in the bench process the baseline swung
// from 490 to 1330 MiB/s within a run; in fresh processes, the same minutes, 1090-1410.
// Run directly, this file reads `cmd args…` and prints `{"bytes":…,"ms":…}`.
import { execFile, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** Spawns a command in this process and reads its stdout pipe to EOF; resolves with bytes read. */
export function localPipe(cmd: string, args: string[]): Promise<{ bytes: number; exitCode: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "ignore"] });
    let bytes = 0;
    child.stdout.on("data", (d: Buffer) => (bytes += d.length));
    child.once("error", reject);
    child.once("close", (exitCode) => resolve({ bytes, exitCode }));
  });
}

/** `localPipe` run and timed in a fresh Node process (its start not counted). */
export async function localPipeFresh(cmd: string, args: string[]): Promise<{ bytes: number; ms: number }> {
  const { stdout } = await promisify(execFile)(process.execPath, [fileURLToPath(import.meta.url), cmd, ...args]);
  return JSON.parse(stdout) as { bytes: number; ms: number };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [cmd, ...args] = process.argv.slice(2);
  const t0 = performance.now();
  const { bytes } = await localPipe(cmd, args);
  process.stdout.write(`${JSON.stringify({ bytes, ms: performance.now() - t0 })}\n`);
}

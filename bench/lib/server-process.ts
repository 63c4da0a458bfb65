import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";

/** A baseline server running as its own Node process (like the daemon), and how to stop it. */
export interface ServerProcess {
  url: string;
  /** The first line the script printed (its port, or ports). */
  firstLine: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Runs `script args` with this Node (at nice `opts.nice` when given); the script prints its port
 * (first) on stdout once listening.
 */
export async function startServerProcess(script: string, args: string[] = [], opts: { nice?: number } = {}): Promise<ServerProcess> {
  const line = [process.execPath, script, ...args];
  const [file, ...argv] = opts.nice === undefined ? line : ["nice", "-n", String(opts.nice), ...line];
  const proc = spawn(file, argv, { stdio: ["ignore", "pipe", "inherit"] });
  const [chunk] = (await once(proc.stdout!, "data")) as [Buffer];
  const firstLine = chunk.toString().trim();
  const port = Number(firstLine.split(" ")[0]);
  if (!port) throw new Error(`${script} did not report a port`);
  return {
    url: `http://127.0.0.1:${port}`,
    firstLine,
    proc,
    async stop() {
      if (proc.exitCode === null) {
        proc.kill("SIGTERM");
        await once(proc, "exit");
      }
    },
  };
}

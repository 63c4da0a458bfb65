import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";

/** A baseline server running as its own Node process (like the daemon), and how to stop it. */
export interface ServerProcess {
  url: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/** Runs `script args` with this Node; the script prints its port on stdout once listening. */
export async function startServerProcess(script: string, args: string[] = []): Promise<ServerProcess> {
  const proc = spawn(process.execPath, [script, ...args], { stdio: ["ignore", "pipe", "inherit"] });
  const [chunk] = (await once(proc.stdout!, "data")) as [Buffer];
  const port = Number(chunk.toString().trim());
  if (!port) throw new Error(`${script} did not report a port`);
  return {
    url: `http://127.0.0.1:${port}`,
    proc,
    async stop() {
      if (proc.exitCode === null) {
        proc.kill("SIGTERM");
        await once(proc, "exit");
      }
    },
  };
}

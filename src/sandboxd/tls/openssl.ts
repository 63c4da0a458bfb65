import { execFile } from "node:child_process";

/** Runs the openssl CLI (a system dependency); resolves with its stdout, rejects with its stderr when it fails or is missing. */
export function openssl(args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("openssl", args, { cwd, timeout: 30_000 }, (err, stdout, stderr) => {
      if (!err) return resolve(String(stdout));
      const missing = (err as NodeJS.ErrnoException).code === "ENOENT";
      reject(new Error(missing ? "the openssl command is not installed (apt-get install openssl)" : `openssl ${args[0]} failed: ${String(stderr).trim() || err.message}`));
    });
  });
}

import { execFile } from "node:child_process";

/** Runs the openssl CLI (a system dependency); rejects with its stderr when it fails or is missing. */
export function openssl(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile("openssl", args, { cwd, timeout: 30_000 }, (err, _stdout, stderr) => {
      if (!err) return resolve();
      const missing = (err as NodeJS.ErrnoException).code === "ENOENT";
      reject(new Error(missing ? "the openssl command is not installed (apt-get install openssl)" : `openssl ${args[0]} failed: ${String(stderr).trim() || err.message}`));
    });
  });
}

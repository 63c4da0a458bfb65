import { spawn } from "node:child_process";
import { NODE, ROOT, type Sandboxd } from "./sandboxd.js";

/**
 * Runs a module script with the published SDK in a fresh Node given only what `serve` printed
 * (non-debug mode; `env` overrides, e.g. another team's E2B_API_KEY); resolves with the JSON of
 * its last stdout line.
 */
export function runSdk(s: Sandboxd, script: string, env: Record<string, string> = {}): Promise<any> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE, ["--input-type=module", "-e", script], {
      cwd: ROOT,
      env: { ...process.env, ...s.sdkEnv, E2B_DEBUG: "", E2B_API_URL: "", E2B_SANDBOX_URL: "", E2B_ACCESS_TOKEN: "", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c));
    child.stderr.on("data", (c: Buffer) => (out += c));
    const timer = setTimeout(() => child.kill("SIGKILL"), 150_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      const last = out.trim().split("\n").pop() ?? "";
      if (code !== 0) return reject(new Error(`SDK script exited ${code}:\n${out}`));
      try {
        resolve(JSON.parse(last));
      } catch {
        reject(new Error(`SDK script printed no JSON:\n${out}`));
      }
    });
  });
}

import { spawn } from "node:child_process";
import { NODE, ROOT, type Sandboxd } from "./sandboxd.js";

/** How runSdk runs its script. */
export interface SdkRunOptions {
  /** Overrides of the environment, e.g. another team's E2B_API_KEY. */
  env?: Record<string, string>;
  /** Working directory (the SDK's Template() resolves COPY sources from it). */
  cwd?: string;
  /** Killed after this long (default 150 s). */
  timeoutMs?: number;
  /** Module code put before the script (imports, helpers). */
  prelude?: string;
}

/**
 * Runs a module script with the published SDK in a fresh Node given only what `serve` printed
 * (non-debug mode); resolves with the JSON of its last stdout line.
 */
export function runSdk(s: Sandboxd, script: string, opts: SdkRunOptions = {}): Promise<any> {
  return new Promise((resolve, reject) => {
    const code = opts.prelude ? `${opts.prelude}\n${script}` : script;
    const child = spawn(NODE, ["--input-type=module", "-e", code], {
      cwd: opts.cwd ?? ROOT,
      env: { ...process.env, ...s.sdkEnv, E2B_DEBUG: "", E2B_API_URL: "", E2B_SANDBOX_URL: "", E2B_ACCESS_TOKEN: "", ...opts.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c));
    child.stderr.on("data", (c: Buffer) => (out += c));
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 150_000);
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

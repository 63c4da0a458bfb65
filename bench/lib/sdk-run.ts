/** Runs SDK scripts in a fresh Node (trusting sandboxd's CA through the SDK's environment). */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { NODE, ROOT } from "../../test/sandboxd/helpers/sandboxd.js";

/** Starts `script` (an ES module body) with numeric arguments and the SDK's environment. */
export function sdkChild(script: string, args: readonly number[], env: Record<string, string>): ChildProcessWithoutNullStreams {
  return spawn(NODE, ["--input-type=module", "-e", script, ...args.map(String)], {
    cwd: ROOT,
    env: { ...process.env, ...env, E2B_DEBUG: "", E2B_API_URL: "", E2B_SANDBOX_URL: "" },
    stdio: ["pipe", "pipe", "pipe"],
  });
}

/** Runs a script to its end; resolves with its last stdout line parsed as JSON. */
export function sdkRun<T>(script: string, args: readonly number[], env: Record<string, string>): Promise<T> {
  const child = sdkChild(script, args, env);
  child.stdin.end();
  let out = "";
  let err = "";
  child.stdout.on("data", (c: Buffer) => (out += c));
  child.stderr.on("data", (c: Buffer) => (err += c));
  return new Promise((resolve, reject) => child.on("exit", (code) => {
    if (code !== 0) return reject(new Error(`SDK script exited ${code}: ${err.slice(-800)}`));
    resolve(JSON.parse(out.trim().split("\n").pop()!) as T);
  }));
}

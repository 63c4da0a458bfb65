import { spawn } from "node:child_process";
import { api, type ApiAnswer } from "./api-client.js";
import { NODE, ROOT, type Sandboxd } from "./sandboxd.js";

/** A build's status answer. */
export interface BuildStatus {
  status: string;
  logEntries: { timestamp: string; level: string; message: string; step?: string }[];
  reason?: { message: string; step?: string; logEntries?: { message: string }[] };
}

/**
 * Polls a build's status (paging the logs as the SDK does) until it is ready or error; returns
 * the last answer, every log entry and every status seen.
 */
export async function waitForBuild(s: Sandboxd, ca: Buffer, templateID: string, buildID: string, timeoutMs = 480_000): Promise<{ last: BuildStatus; logs: BuildStatus["logEntries"]; seen: Set<string> }> {
  const logs: BuildStatus["logEntries"] = [];
  const seen = new Set<string>();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r: ApiAnswer = await api(s, ca, "GET", `/templates/${templateID}/builds/${buildID}/status?logsOffset=${logs.length}`);
    if (r.status !== 200) throw new Error(`status answered ${r.status}: ${r.body}`);
    const st = r.json as BuildStatus;
    seen.add(st.status);
    logs.push(...st.logEntries);
    if ((st.status === "ready" || st.status === "error") && st.logEntries.length === 0) return { last: st, logs, seen };
    if (Date.now() > deadline) throw new Error(`build ${buildID} still ${st.status} after ${timeoutMs} ms; logs:\n${logs.map((l) => l.message).join("\n")}`);
    if (st.logEntries.length === 0) await new Promise((res) => setTimeout(res, 300));
  }
}

/** Runs a module script with the published SDK in a fresh Node given only what `serve` printed; resolves with its last line as JSON. */
export function runSdk(s: Sandboxd, script: string, cwd = ROOT, timeoutMs = 540_000): Promise<any> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE, ["--input-type=module", "-e", script], {
      cwd,
      env: { ...process.env, ...s.sdkEnv, E2B_DEBUG: "", E2B_API_URL: "", E2B_SANDBOX_URL: "", E2B_ACCESS_TOKEN: "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c));
    child.stderr.on("data", (c: Buffer) => (out += c));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
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

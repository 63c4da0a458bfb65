import { api, type ApiAnswer } from "./api-client.js";
import { ROOT, type Sandboxd } from "./sandboxd.js";
import { runSdk as runSdkIn } from "./sdk-run.js";

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

/** runSdk with a working directory (COPY sources) and a build's longer time limit. */
export function runSdk(s: Sandboxd, script: string, cwd = ROOT, timeoutMs = 540_000): Promise<any> {
  return runSdkIn(s, script, { cwd, timeoutMs });
}

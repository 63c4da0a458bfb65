// A sandbox's log (envd's lines, from GET /v2/sandboxes/{id}/logs) on demand, as text.
import { call } from "./api.js";

interface LogEntry {
  timestamp: string;
  level: string;
  message: string;
  fields: Record<string, string>;
}

/** Newest entries shown. */
const LINES = 200;

/** One entry as a line of text: time, level, message and its fields as key=value. */
function line(e: LogEntry): string {
  const fields = Object.entries(e.fields ?? {}).filter(([k]) => k !== "logger").map(([k, v]) => `${k}=${v}`);
  return [e.timestamp, e.level.toUpperCase().padEnd(5), e.message, ...fields].join(" ");
}

/** Shows the newest lines of a sandbox's log in the sandbox log panel (text only, never markup). */
export async function showSandboxLog(id: string): Promise<void> {
  const panel = document.getElementById("sandbox-log")!;
  const title = document.getElementById("sandbox-log-title")!;
  const pre = panel.querySelector("pre")!;
  panel.hidden = false;
  panel.dataset.sandboxId = id;
  title.textContent = `Log of ${id}`;
  pre.textContent = "loading…";
  try {
    const { logs } = await call<{ logs: LogEntry[] }>("GET", `/v2/sandboxes/${encodeURIComponent(id)}/logs?direction=backward&limit=${LINES}`);
    pre.textContent = logs.reverse().map(line).join("\n") || "(no log lines)";
  } catch (err) {
    pre.textContent = `Cannot read the sandbox's log: ${(err as Error).message}`;
  }
}

/** The sandbox a link asks to inspect (`#sandbox=<id>`, where /dashboard/inspect/sandbox/<id> leads), if any. */
export function inspectedSandbox(hash = location.hash): string | undefined {
  const m = /^#sandbox=([a-z0-9]{1,64})$/.exec(hash);
  return m?.[1];
}

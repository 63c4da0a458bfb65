/**
 * Commands run through envd's process.Process/Start (Connect JSON streaming): one command to its
 * end, and a template's start and ready commands. Every exchange is bounded in time and bytes.
 */
import { EnvdProtocolError, textPrefix } from "./bounded-read.js";
import { envelope, Envelopes } from "./envelopes.js";

/** Where and as whom to run a command through a sandbox's envd. */
export interface EnvdTarget {
  ip: string;
  port: number;
  accessToken?: string;
  user: string;
  cwd?: string;
}

/**
 * Starts `bash -l -c cmd` through envd's process.Process/Start (Connect JSON streaming) and reads
 * its events: with `wait`, until its end, resolving with the exit code; without, until its start
 * (the process keeps running: envd does not tie a process to the request that started it).
 * `timeoutMs` bounds the whole exchange, a slow trickle included.
 */
async function startProcess(t: EnvdTarget, cmd: string, wait: boolean, timeoutMs: number): Promise<number> {
  const headers: Record<string, string> = {
    "content-type": "application/connect+json", "connect-protocol-version": "1", authorization: `Basic ${Buffer.from(`${t.user}:`).toString("base64")}`,
  };
  if (t.accessToken) headers["x-access-token"] = t.accessToken;
  const body = envelope({ process: { cmd: "/bin/bash", args: ["-l", "-c", cmd], envs: {}, ...(t.cwd ? { cwd: t.cwd } : {}) } });
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  try {
    const res = await fetch(`http://${t.ip}:${t.port}/process.Process/Start`, { method: "POST", headers, body: new Uint8Array(body), signal: ac.signal });
    if (!res.ok || !res.body) throw new Error(`envd answered ${res.status}: ${await textPrefix(res)}`);
    const reader = res.body.getReader();
    const stream = new Envelopes();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) throw new Error("envd's stream ended before the process did");
        stream.push(value);
        for (let m = stream.next(); m; m = stream.next()) {
          const { flags, msg } = m;
          if (flags & 2) throw new Error(`envd ended the stream: ${String(msg.error?.message ?? "no end event").slice(0, 200)}`);
          if (msg.event?.start && !wait) return 0;
          if (msg.event?.end) return typeof msg.event.end.exitCode === "number" ? msg.event.end.exitCode : msg.event.end.error ? 1 : 0;
        }
      }
    } finally {
      await reader.cancel().catch(() => undefined);
    }
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `bash -l -c cmd` through envd to its end over HTTP/1.1; resolves with its exit code. */
export function runCommand(t: EnvdTarget, cmd: string, timeoutMs: number): Promise<number> {
  return startProcess(t, cmd, true, timeoutMs);
}

/** How often the ready command is tried (E2B: every 2 s, at build time). */
const READY_EVERY_MS = 500;
/**
 * How long create waits for the ready command: under the SDK's default request timeout (60 s),
 * so that a template whose check never passes gets create's error instead of a client timeout.
 */
const READY_LIMIT_MS = 50_000;

/**
 * The template's start command, run the way E2B's snapshot makes it look: started in the
 * background, then `readyCmd` (default: none, or a 20 s wait when only a start command is
 * set, as E2B's) is run until it exits 0. Rejects when the ready check never passes in time.
 */
export async function runStartCommand(t: EnvdTarget, startCmd: string | null | undefined, readyCmd: string | null | undefined, totalMs = READY_LIMIT_MS): Promise<void> {
  if (!startCmd && !readyCmd) return;
  if (startCmd) await startProcess(t, startCmd, false, 10_000);
  const ready = readyCmd || (startCmd ? "sleep 20" : "");
  if (!ready) return;
  const deadline = Date.now() + totalMs;
  let last = "";
  for (;;) {
    try {
      const code = await startProcess(t, ready, true, Math.max(1000, deadline - Date.now()));
      if (code === 0) return;
      last = `exit code ${code}`;
    } catch (err) {
      // An envd that breaks the protocol is not a ready check that has yet to pass.
      if (err instanceof EnvdProtocolError) throw new Error(`the template's ready command could not be run: ${err.message}`);
      last = (err as Error).message;
    }
    if (Date.now() + READY_EVERY_MS > deadline) throw new Error(`the template's ready command did not pass within ${Math.round(totalMs / 1000)} s (last: ${last})`);
    await new Promise((r) => setTimeout(r, READY_EVERY_MS));
  }
}

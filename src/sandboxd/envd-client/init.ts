/** envd's /init: how the control plane hands a sandbox's envd its token, variables, user and clock. */
import { textPrefix } from "./bounded-read.js";

/** What envd's /init gets from the control plane. */
export interface InitRequest {
  ip: string;
  port: number;
  accessToken?: string;
  /** Replaces envd's user variables; undefined leaves them. */
  envVars?: Record<string, string>;
  defaultUser?: string;
  defaultWorkdir?: string;
}

const RETRY_EVERY_MS = 10;
const PER_TRY_MS = 2000;

/**
 * POSTs /init to a sandbox's envd, retrying every 10 ms until it answers 204 or `totalMs` passes
 * (envd may still be starting); the timestamp is refreshed on every try since envd sets the clock
 * from it. Resolves with the envd version it reports, if any.
 */
export async function initEnvd(req: InitRequest, totalMs = 10_000): Promise<string | undefined> {
  const deadline = Date.now() + totalMs;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (req.accessToken) headers["x-access-token"] = req.accessToken;
  let last = "no answer";
  for (;;) {
    const body = JSON.stringify({
      ...(req.envVars ? { envVars: req.envVars } : {}),
      ...(req.accessToken ? { accessToken: req.accessToken } : {}),
      ...(req.defaultUser ? { defaultUser: req.defaultUser } : {}),
      ...(req.defaultWorkdir ? { defaultWorkdir: req.defaultWorkdir } : {}),
      timestamp: new Date().toISOString(),
    });
    try {
      const res = await fetch(`http://${req.ip}:${req.port}/init`, { method: "POST", headers, body, signal: AbortSignal.timeout(Math.min(PER_TRY_MS, Math.max(1, deadline - Date.now()))) });
      // Only the start of an answer is kept (for the error); the per-try signal bounds its time.
      const text = res.status === 204 ? "" : await textPrefix(res);
      if (res.status === 204) {
        await res.body?.cancel().catch(() => undefined);
        return res.headers.get("x-envd-version")?.slice(0, 64) ?? undefined;
      }
      last = `status ${res.status}: ${text.slice(0, 200)}`;
      if (res.status >= 400 && res.status < 500 && res.status !== 429) throw new Error(`envd refused /init (${last})`);
    } catch (err) {
      if ((err as Error).message.startsWith("envd refused")) throw err;
      last = (err as Error).cause ? String(((err as Error).cause as Error).message ?? (err as Error).cause) : (err as Error).message;
    }
    if (Date.now() + RETRY_EVERY_MS > deadline) throw new Error(`envd did not accept /init within ${totalMs} ms (last: ${last})`);
    await new Promise((r) => setTimeout(r, RETRY_EVERY_MS));
  }
}

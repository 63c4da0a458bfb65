/** envd's /init: how the control plane hands a sandbox's envd its token, variables, user and clock. */
import { request } from "node:http";

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
      const res = await postInit(req.ip, req.port, headers, body, Math.min(PER_TRY_MS, Math.max(1, deadline - Date.now())));
      if (res.status === 204) return res.version;
      last = `status ${res.status}: ${res.text.slice(0, 200)}`;
      if (res.status >= 400 && res.status < 500 && res.status !== 429) throw new Error(`envd refused /init (${last})`);
    } catch (err) {
      if ((err as Error).message.startsWith("envd refused")) throw err;
      last = (err as Error).message;
    }
    if (Date.now() + RETRY_EVERY_MS > deadline) throw new Error(`envd did not accept /init within ${totalMs} ms (last: ${last})`);
    await new Promise((r) => setTimeout(r, RETRY_EVERY_MS));
  }
}

/** The most of a refusal's body kept for its message: sandbox root can replace envd. */
const MAX_ANSWER_BYTES = 4096;

/**
 * One POST of /init on a connection of its own (http.request: a new origin costs fetch 5–10 ms
 * more per sandbox); the answer's status, envd's version header and the start of its body. The
 * whole exchange is bounded by `ms`, the body by MAX_ANSWER_BYTES.
 */
function postInit(ip: string, port: number, headers: Record<string, string>, body: string, ms: number): Promise<{ status: number; version: string | undefined; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: ip, port, method: "POST", path: "/init", agent: false, headers: { ...headers, "content-length": String(Buffer.byteLength(body)) } }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const done = () => {
        clearTimeout(timer);
        const version = res.headers["x-envd-version"];
        resolve({ status: res.statusCode ?? 0, version: typeof version === "string" ? version.slice(0, 64) : undefined, text: Buffer.concat(chunks, size).toString("utf8") });
        req.destroy();
      };
      res.on("data", (c: Buffer) => {
        if (size >= MAX_ANSWER_BYTES) return;
        chunks.push(c.subarray(0, MAX_ANSWER_BYTES - size));
        size = Math.min(MAX_ANSWER_BYTES, size + c.length);
        if (size >= MAX_ANSWER_BYTES) done();
      });
      res.on("end", done);
      res.on("error", (err) => reject(err));
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${ms} ms`)), ms);
    req.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end(body);
  });
}

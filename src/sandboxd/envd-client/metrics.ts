/** envd's /metrics read over a kept-alive connection, bounded in bytes and in time. */
import { request, type Agent } from "node:http";

/** A /metrics call not answered within this is abandoned. */
export const METRICS_TIMEOUT_MS = 3000;
/** The largest /metrics answer taken: envd's is a few hundred bytes; sandbox root can replace envd. */
const MAX_METRICS_BYTES = 64 * 1024;

/**
 * Reads one JSON answer of envd's /metrics; rejects on a non-200, bad JSON, an answer past
 * `MAX_METRICS_BYTES`, or when the whole exchange (a slow trickle included) outlasts the timeout.
 */
export function fetchMetrics(agent: Agent, ip: string, port: number, token: string | undefined): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = token ? { "x-access-token": token } : {};
    const chunks: Buffer[] = [];
    let size = 0;
    const req = request({ host: ip, port, path: "/metrics", agent, headers }, (res) => {
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size > MAX_METRICS_BYTES) return void req.destroy(new Error(`envd's /metrics answer is larger than ${MAX_METRICS_BYTES} bytes`));
        chunks.push(c);
      });
      res.on("end", () => {
        clearTimeout(deadline);
        if (res.statusCode !== 200) return reject(new Error(`envd answered ${res.statusCode}`));
        try {
          const parsed: unknown = JSON.parse(Buffer.concat(chunks, size).toString("utf8"));
          if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return reject(new Error("envd's /metrics answer is not a JSON object"));
          resolve(parsed as Record<string, unknown>);
        } catch {
          reject(new Error("envd's /metrics answer is not JSON"));
        }
      });
      res.on("error", reject);
    });
    const deadline = setTimeout(() => req.destroy(new Error(`no whole answer within ${METRICS_TIMEOUT_MS} ms`)), METRICS_TIMEOUT_MS);
    req.on("error", (err) => {
      clearTimeout(deadline);
      reject(err);
    });
    req.on("close", () => clearTimeout(deadline));
    req.end();
  });
}

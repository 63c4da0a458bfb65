import { request } from "node:https";
import type { Sandboxd } from "./sandboxd.js";

/** An answer of the control API. */
export interface ApiAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json: any;
}

/** One HTTPS request to `api.<domain>` of a test sandboxd, trusting its CA; the key defaults to its own. */
export function api(s: Sandboxd, ca: Buffer, method: string, path: string, opts: { body?: unknown; raw?: string | Buffer; key?: string | null } = {}): Promise<ApiAnswer> {
  const headers: Record<string, string> = { host: `api.e2b.localhost:${s.port}` };
  if (opts.key !== null) headers["x-api-key"] = opts.key ?? s.apiKey;
  const payload = opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
  if (payload !== undefined) headers["content-type"] = "application/json";
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port: s.port, path, method, ca, servername: "api.e2b.localhost", agent: false, headers }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c));
      res.on("end", () => {
        let json: unknown;
        try {
          json = body ? JSON.parse(body) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(payload);
  });
}

/**
 * Timed calls to a running sandboxd's control API over one kept-alive TLS connection (as an SDK
 * client reuses its), plus the process figures of sandboxd itself (RSS, CPU) that density and
 * breakdown scenarios publish.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Agent, request } from "node:https";
import type { Sandboxd } from "../../test/sandboxd/helpers/sandboxd.js";
import { percentile } from "./stats.js";

/** A keep-alive client of one sandboxd's API. */
export interface ApiClient {
  /** GET `path` with the API key; resolves with status, body and the time it took. */
  get(path: string): Promise<{ status: number; body: string; ms: number }>;
  /** p50 of `n` GETs of `path` (after one untimed call), failing on a non-200. */
  p50(path: string, n: number): Promise<number>;
  close(): void;
}

/** A client over one kept-alive connection to `s`'s API host. */
export function apiClient(s: Sandboxd): ApiClient {
  const agent = new Agent({ keepAlive: true, maxSockets: 1, ca: readFileSync(s.caFile), servername: "api.e2b.localhost" });
  const get = (path: string) =>
    new Promise<{ status: number; body: string; ms: number }>((resolve, reject) => {
      const t0 = performance.now();
      const req = request({ host: "127.0.0.1", port: s.port, path, agent, servername: "api.e2b.localhost", headers: { host: `api.e2b.localhost:${s.port}`, "x-api-key": s.apiKey } }, (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, ms: performance.now() - t0 }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end();
    });
  return {
    get,
    async p50(path, n) {
      await get(path);
      const ms: number[] = [];
      for (let i = 0; i < n; i++) {
        const r = await get(path);
        if (r.status !== 200) throw new Error(`GET ${path} answered ${r.status}: ${r.body.slice(0, 300)}`);
        ms.push(r.ms);
      }
      return percentile(ms, 50);
    },
    close: () => agent.destroy(),
  };
}

/** The pid of the `sandboxd serve` that runs on `s`'s data dir. */
export function sandboxdPid(s: Sandboxd): number {
  return Number(execFileSync("pgrep", ["-o", "-f", `serve.*${s.dataDir}`], { encoding: "utf8" }).trim());
}

/** RSS of a pid in MiB. */
export function rssMiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** The machine's memory in use (MemTotal − MemAvailable), MiB. */
export function machineUsedMiB(): number {
  const text = readFileSync("/proc/meminfo", "utf8");
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN);
  return (kb("MemTotal") - kb("MemAvailable")) / 1024;
}

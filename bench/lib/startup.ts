import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import http from "node:http";
import net from "node:net";
import { now, sleep } from "./stats.js";

/** A port that was free a moment ago (bound to 0 and released). */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const port = (srv.address() as net.AddressInfo).port;
  srv.close();
  await once(srv, "close");
  return port;
}

function health(port: number): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/health", agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", () => resolve(0));
  });
}

/** A process started by `timeToHealthy`, kept running for memory readings. */
export interface Started {
  proc: ChildProcess;
  /** ms from spawn() to the first 204 from GET /health. */
  ms: number;
  /** now() just before spawn(). */
  spawnedAt: number;
  stop(): Promise<void>;
}

/** Spawns `file args` and polls GET /health on `port` until it answers 204; measures the time. */
export async function timeToHealthy(file: string, args: string[], port: number, timeoutMs = 15_000): Promise<Started> {
  const t0 = now();
  const proc = spawn(file, args, { stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  proc.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 5000);
      await once(proc, "exit");
      clearTimeout(t);
    }
  };
  for (;;) {
    if ((await health(port)) === 204) return { proc, ms: now() - t0, spawnedAt: t0, stop };
    if (proc.exitCode !== null || now() - t0 > timeoutMs) {
      await stop();
      throw new Error(`${file} did not become healthy: exit ${proc.exitCode}; ${err.slice(0, 500)}`);
    }
    await sleep(1);
  }
}

/** The bare-node baseline: the same Node answering GET /health with 204, nothing else. */
export function bareNodeArgs(port: number): string[] {
  const code =
    "require('http').createServer((q,s)=>{s.writeHead(204,{'cache-control':'no-store'});s.end()})" +
    `.listen(${port},'127.0.0.1');process.on('SIGTERM',()=>process.exit(0))`;
  return ["-e", code];
}

import http from "node:http";
import { setPriority } from "node:os";
import http2 from "node:http2";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { StatRequestSchema, StatResponseSchema } from "../../src/envd/gen/filesystem/filesystem_pb.js";
import { benchTransports } from "./transports.js";

/** Stat latencies from one sampler: ms per call, when each call began (epoch ms), and errors. */
export interface StatSamples {
  ms: number[];
  at: number[];
  errors: string[];
}

interface SamplerConfig {
  url: string;
  /** Where HTTP/1.1 (JSON) requests go, when not to `url`. */
  http1Url?: string;
  path: string;
  codec: "binary" | "json";
  gapMs: number;
  /** Lean clients (hand-made requests on a kept-alive connection) instead of connect-node's. */
  lean?: boolean;
  /**
   * The sampler thread's nice value (only that thread's: Linux priorities are per thread).
   * A remote client's waits for a CPU are not the daemon's latency; at the daemon's own
   * priority, this thread's are mostly not counted either.
   */
  nice?: number;
}

type Stat = () => Promise<void>;

/**
 * A lean Stat: binary over one h2c session, or JSON over one kept-alive HTTP/1.1 connection;
 * the answer's status and entry are checked. What a remote caller costs the daemon, without
 * connect-node's client on the same cores.
 */
function leanStat(config: SamplerConfig): Stat {
  const auth = "Basic dXNlcjo=";
  if (config.codec === "binary") {
    const session = http2.connect(config.url);
    const body = toBinary(StatRequestSchema, create(StatRequestSchema, { path: config.path }));
    return () =>
      new Promise((resolve, reject) => {
        const req = session.request({ ":method": "POST", ":path": "/filesystem.Filesystem/Stat", "content-type": "application/proto", authorization: auth });
        const chunks: Buffer[] = [];
        let status = 0;
        req.on("response", (h) => (status = Number(h[":status"])));
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          if (status !== 200) return reject(new Error(`Stat answered HTTP ${status}`));
          if (!fromBinary(StatResponseSchema, Buffer.concat(chunks)).entry) return reject(new Error("Stat answered no entry"));
          resolve();
        });
        req.on("error", reject);
        req.end(body);
      });
  }
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const body = JSON.stringify({ path: config.path });
  const url = `${config.http1Url ?? config.url}/filesystem.Filesystem/Stat`;
  return () =>
    new Promise((resolve, reject) => {
      const req = http.request(url, { method: "POST", agent, headers: { "content-type": "application/json", authorization: auth } }, (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (c: string) => (text += c));
        res.on("end", () => {
          if (res.statusCode !== 200) return reject(new Error(`Stat answered HTTP ${res.statusCode}`));
          if (!(JSON.parse(text) as { entry?: unknown }).entry) return reject(new Error("Stat answered no entry"));
          resolve();
        });
      });
      req.on("error", reject);
      req.end(body);
    });
}

/** Wall-clock ms comparable across threads (performance.now() has a per-thread origin). */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * Samples Filesystem.Stat latency on its own thread, so the load the bench generates on its
 * main thread (hundreds of streams) cannot delay the sampler's timers and callbacks and be
 * counted as daemon latency. `stop()` ends the sampling and returns the samples.
 */
export class StatSampler {
  private readonly worker: Worker;
  private readonly result: Promise<StatSamples>;
  private readonly ready: Promise<void>;

  constructor(config: SamplerConfig) {
    this.worker = new Worker(new URL(import.meta.url), { workerData: config });
    this.ready = new Promise((resolve) => this.worker.once("message", () => resolve()));
    this.result = new Promise((resolve, reject) => {
      this.worker.once("error", reject);
      this.worker.on("message", (m: { samples?: StatSamples }) => {
        if (m.samples) resolve(m.samples);
      });
    });
  }

  /** Resolves once the sampler's first Stat answered (the thread and its client are warm). */
  started(): Promise<void> {
    return this.ready;
  }

  /** Stops sampling and returns everything sampled. */
  async stop(): Promise<StatSamples> {
    this.worker.postMessage("stop");
    const samples = await this.result;
    await this.worker.terminate();
    return samples;
  }
}

async function sampleInWorker(config: SamplerConfig): Promise<void> {
  if (config.nice !== undefined) setPriority(config.nice);
  let stat: Stat;
  if (config.lean) stat = leanStat(config);
  else {
    const client = benchTransports(config.url, config.http1Url).fs[config.codec];
    stat = async () => void (await client.stat({ path: config.path }));
  }
  let stopped = false;
  parentPort!.on("message", () => (stopped = true));
  await stat();
  parentPort!.postMessage({ started: true });
  const out: StatSamples = { ms: [], at: [], errors: [] };
  while (!stopped) {
    const t0 = performance.now();
    try {
      await stat();
      out.ms.push(performance.now() - t0);
      out.at.push(performance.timeOrigin + t0);
    } catch (err) {
      out.errors.push((err as Error).message);
    }
    await new Promise((r) => setTimeout(r, config.gapMs));
  }
  parentPort!.postMessage({ samples: out });
}

if (!isMainThread && (workerData as SamplerConfig | undefined)?.url) void sampleInWorker(workerData as SamplerConfig);

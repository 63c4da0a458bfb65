import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
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
  const client = benchTransports(config.url, config.http1Url).fs[config.codec];
  let stopped = false;
  parentPort!.on("message", () => (stopped = true));
  await client.stat({ path: config.path });
  parentPort!.postMessage({ started: true });
  const out: StatSamples = { ms: [], at: [], errors: [] };
  while (!stopped) {
    const t0 = performance.now();
    try {
      await client.stat({ path: config.path });
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

import type { Logger } from "../log.js";
import type { WarmPoolStats } from "../pool/warm-pool.js";
import type { Store } from "../store/store.js";
import { watchHeap, type HeapWatch } from "./heap.js";
import { createEnvdPoller, type EnvdPoller, type RowsSource } from "./envd-poller.js";
import { createTeamSampler, type Clock, type TeamSampler } from "./team-sampler.js";

/** Everything metrics: the team sampler, the envd poller, the live-heap watch, and what the API needs to answer queries. */
export interface Metrics {
  sampler: TeamSampler;
  poller: EnvdPoller;
  /** sandboxd's heap in use after its last full collection (watched once started). */
  heap: () => number | undefined;
  /** How long samples are kept, seconds. */
  retentionS: number;
  clock: Clock;
  /** When this process started, ms since the epoch. */
  startedAt: number;
  /** The warm pool's figures (set once the sandbox service exists). */
  warmPool: () => WarmPoolStats;
  /** Every sandbox row as the poller reads it each round (set to the lifecycle's in-memory mirror once the sandbox service exists). */
  rows: RowsSource;
  start(): void;
  stop(): void;
}

/** Builds the sampler and the poller over the store (started by `start`). */
export function createMetrics(opts: { store: Store; log: Logger; retentionS: number; clock?: Clock }): Metrics {
  const clock = opts.clock ?? Date.now;
  const sampler = createTeamSampler({ store: opts.store, log: opts.log, retentionS: opts.retentionS, clock });
  const poller = createEnvdPoller({ store: opts.store, log: opts.log, clock, rows: () => metrics.rows() });
  let heap: HeapWatch | undefined;
  const metrics: Metrics = {
    sampler,
    poller,
    heap: () => heap?.live(),
    retentionS: opts.retentionS,
    clock,
    startedAt: clock(),
    warmPool: () => ({ ready: [], claimed: 0, missed: 0 }),
    rows: () => opts.store.sandboxes.all(),
    start() {
      sampler.start();
      poller.start();
      heap ??= watchHeap();
    },
    stop() {
      sampler.stop();
      poller.stop();
      heap?.stop();
      heap = undefined;
    },
  };
  return metrics;
}

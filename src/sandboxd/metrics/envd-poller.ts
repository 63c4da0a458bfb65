import { connectEnvd, type EnvdConnector, type EnvdClient } from "../envd-client/client.js";
import { ENVD_PORT } from "../envd-client/port.js";
import type { Logger } from "../log.js";
import { envdAccessToken } from "../sandboxes/tokens.js";
import type { SandboxSample } from "../store/sandbox-metrics.js";
import type { SandboxRow } from "../store/sandboxes.js";
import { installSecret } from "../store/seed.js";
import type { Store } from "../store/store.js";
import type { Clock } from "./team-sampler.js";

/** Polling period, as E2B's orchestrator. */
export const POLL_EVERY_MS = 5000;

/** What the poller knows of a sandbox's envd right now. */
export interface EnvdHealth {
  up: boolean;
  /** When the current state began (ms since the epoch). */
  since: number;
  /** The last failure, when down. */
  error?: string;
}

/** Share of the period a timed round spreads its requests over (the rest absorbs slow answers). */
const SPREAD_SHARE = 0.8;

/** Polls every running sandbox's envd `/metrics` over one kept-alive connection per sandbox. */
export interface EnvdPoller {
  /**
   * One round: a request to each running sandbox that has none in flight, started evenly over
   * `spreadMs` (0: all at once); resolves when all have settled and their samples are written.
   */
  poll(spreadMs?: number): Promise<void>;
  health(sandboxID: string): EnvdHealth | undefined;
  /** The latest reading per running sandbox (in memory; the store has the history). */
  latest(sandboxID: string): SandboxSample | undefined;
  /** Rounds run, requests sent and requests that failed since start. */
  stats(): { rounds: number; requests: number; failures: number };
  start(): void;
  stop(): void;
}

interface Target {
  client: EnvdClient;
  /** The address the client was made for (a sandbox keeps its address for life). */
  at: string;
  inflight: boolean;
  health: EnvdHealth;
  latest?: SandboxSample;
}

/** envd's snake_case reading as a sample taken at `ts`; a missing or non-numeric field is 0. */
function toSample(m: Record<string, unknown>, ts: number): SandboxSample {
  const n = (k: string) => (typeof m[k] === "number" && Number.isFinite(m[k]) ? (m[k] as number) : 0);
  return {
    ts, cpuCount: n("cpu_count"), cpuUsedPct: n("cpu_used_pct"), memUsed: n("mem_used"), memTotal: n("mem_total"),
    memCache: n("mem_cache"), diskUsed: n("disk_used"), diskTotal: n("disk_total"),
  };
}

/** Every sandbox row, as the poller reads them each round (do not mutate). */
export type RowsSource = () => readonly Readonly<SandboxRow>[];

/**
 * The poller; a sandbox whose envd stops answering is marked down (and logged once), never waited
 * on. `rows` is where each round finds the running sandboxes: the lifecycle's in-memory mirror of
 * the store once there is one (no row is read from SQLite or parsed per round), the store otherwise.
 */
export function createEnvdPoller(opts: { store: Store; log: Logger; clock?: Clock; envd?: EnvdConnector; rows?: RowsSource }): EnvdPoller {
  const { store, log } = opts;
  const rowsOf = opts.rows ?? (() => store.sandboxes.all());
  const connect = opts.envd ?? connectEnvd;
  const clock = opts.clock ?? Date.now;
  const targets = new Map<string, Target>();
  const counters = { rounds: 0, requests: 0, failures: 0 };
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let secret: string | undefined;

  const tokenOf = (row: Readonly<SandboxRow>) => (row.secure ? envdAccessToken((secret ??= installSecret(store)), row.id) : undefined);

  const pollOne = async (row: Readonly<SandboxRow>, t: Target, written: [Readonly<SandboxRow>, SandboxSample][]) => {
    t.inflight = true;
    counters.requests++;
    try {
      const sample = toSample(await t.client.metrics(), Math.floor(clock() / 1000));
      t.latest = sample;
      if (!targets.has(row.id)) return;
      written.push([row, sample]);
      if (!t.health.up) log.info({ sandboxID: row.id }, "envd answers /metrics again");
      if (!t.health.up) t.health = { up: true, since: clock() };
    } catch (err) {
      counters.failures++;
      // killed or paused since the round began (a spread round lasts seconds): not a failing envd
      if (!rowsOf().some((r) => r.id === row.id && r.state === "running")) return;
      if (t.health.up) log.warn({ sandboxID: row.id, err: (err as Error).message }, "envd does not answer /metrics; the sandbox is marked unresponsive");
      t.health = { up: false, since: t.health.up ? clock() : t.health.since, error: (err as Error).message };
    } finally {
      t.inflight = false;
    }
  };

  const poller: EnvdPoller = {
    async poll(spreadMs = 0) {
      counters.rounds++;
      const rows = rowsOf().filter((r) => r.state === "running" && r.ip);
      const live = new Set(rows.map((r) => r.id));
      for (const [id, t] of targets) {
        if (live.has(id)) continue;
        t.client.close();
        targets.delete(id);
      }
      const round: Promise<void>[] = [];
      const written: [Readonly<SandboxRow>, SandboxSample][] = [];
      // paced: a thousand envds woken in the same millisecond take both cores from creates and the API
      const gap = rows.length > 1 ? spreadMs / rows.length : 0;
      for (const [i, row] of rows.entries()) {
        if (gap > 0 && i > 0) await new Promise((r) => setTimeout(r, gap));
        if (stopped) break;
        const at = `${row.ip}:${row.envdPort ?? ENVD_PORT}`;
        const client = () => connect({ ip: row.ip!, port: row.envdPort ?? ENVD_PORT, accessToken: tokenOf(row) });
        let t = targets.get(row.id);
        if (!t) targets.set(row.id, (t = { client: client(), at, inflight: false, health: { up: true, since: clock() } }));
        if (t.inflight) continue;
        if (t.at !== at) {
          t.client.close();
          Object.assign(t, { client: client(), at });
        }
        round.push(pollOne(row, t, written));
      }
      await Promise.all(round);
      // one transaction per round, not one commit per sandbox
      const kept = written.filter(([row]) => targets.has(row.id));
      if (kept.length > 0) store.transaction(() => {
        for (const [row, sample] of kept) store.sandboxMetrics.record(row.id, row.teamID, sample);
      });
    },

    health: (id) => targets.get(id)?.health,
    latest: (id) => targets.get(id)?.latest,
    stats: () => ({ ...counters }),

    start() {
      if (timer) return;
      stopped = false;
      timer = setInterval(() => {
        poller.poll(POLL_EVERY_MS * SPREAD_SHARE).catch((err: Error) => log.error({ err: err.message }, "sandbox metrics poll failed"));
      }, POLL_EVERY_MS);
      timer.unref();
    },

    stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
      stopped = true;
      for (const t of targets.values()) t.client.close();
      targets.clear();
    },
  };
  return poller;
}

import { Agent, request } from "node:http";
import type { Logger } from "../log.js";
import { envdAccessToken } from "../sandboxes/tokens.js";
import type { SandboxSample } from "../store/sandbox-metrics.js";
import type { SandboxRow } from "../store/sandboxes.js";
import { installSecret } from "../store/seed.js";
import type { Store } from "../store/store.js";
import type { Clock } from "./team-sampler.js";

/** Polling period, as E2B's orchestrator. */
export const POLL_EVERY_MS = 5000;
/** A /metrics call not answered within this is abandoned and the sandbox marked unresponsive. */
const POLL_TIMEOUT_MS = 3000;
const ENVD_PORT = 49983;

/** What the poller knows of a sandbox's envd right now. */
export interface EnvdHealth {
  up: boolean;
  /** When the current state began (ms since the epoch). */
  since: number;
  /** The last failure, when down. */
  error?: string;
}

/** Polls every running sandbox's envd `/metrics` over one kept-alive connection per sandbox. */
export interface EnvdPoller {
  /** One round: a request to each running sandbox that has none in flight; resolves when all have settled. */
  poll(): Promise<void>;
  health(sandboxID: string): EnvdHealth | undefined;
  /** The latest reading per running sandbox (in memory; the store has the history). */
  latest(sandboxID: string): SandboxSample | undefined;
  /** Rounds run, requests sent and requests that failed since start. */
  stats(): { rounds: number; requests: number; failures: number };
  start(): void;
  stop(): void;
}

interface Target {
  agent: Agent;
  inflight: boolean;
  health: EnvdHealth;
  latest?: SandboxSample;
}

/** The largest /metrics answer taken: envd's is a few hundred bytes; sandbox root can replace envd. */
const MAX_METRICS_BYTES = 64 * 1024;

/**
 * Reads one JSON answer of envd's /metrics; rejects on a non-200, bad JSON, an answer past
 * `MAX_METRICS_BYTES`, or when the whole exchange (a slow trickle included) outlasts the timeout.
 */
function fetchMetrics(agent: Agent, row: SandboxRow, token: string | undefined): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = token ? { "x-access-token": token } : {};
    const chunks: Buffer[] = [];
    let size = 0;
    const req = request({ host: row.ip!, port: row.envdPort ?? ENVD_PORT, path: "/metrics", agent, headers }, (res) => {
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
    const deadline = setTimeout(() => req.destroy(new Error(`no whole answer within ${POLL_TIMEOUT_MS} ms`)), POLL_TIMEOUT_MS);
    req.on("error", (err) => {
      clearTimeout(deadline);
      reject(err);
    });
    req.on("close", () => clearTimeout(deadline));
    req.end();
  });
}

/** envd's snake_case reading as a sample taken at `ts`; a missing or non-numeric field is 0. */
function toSample(m: Record<string, unknown>, ts: number): SandboxSample {
  const n = (k: string) => (typeof m[k] === "number" && Number.isFinite(m[k]) ? (m[k] as number) : 0);
  return {
    ts, cpuCount: n("cpu_count"), cpuUsedPct: n("cpu_used_pct"), memUsed: n("mem_used"), memTotal: n("mem_total"),
    memCache: n("mem_cache"), diskUsed: n("disk_used"), diskTotal: n("disk_total"),
  };
}

/** The poller; a sandbox whose envd stops answering is marked down (and logged once), never waited on. */
export function createEnvdPoller(opts: { store: Store; log: Logger; clock?: Clock }): EnvdPoller {
  const { store, log } = opts;
  const clock = opts.clock ?? Date.now;
  const targets = new Map<string, Target>();
  const counters = { rounds: 0, requests: 0, failures: 0 };
  let timer: NodeJS.Timeout | undefined;
  let secret: string | undefined;

  const tokenOf = (row: SandboxRow) => (row.secure ? envdAccessToken((secret ??= installSecret(store)), row.id) : undefined);

  const pollOne = async (row: SandboxRow, t: Target) => {
    t.inflight = true;
    counters.requests++;
    try {
      const sample = toSample(await fetchMetrics(t.agent, row, tokenOf(row)), Math.floor(clock() / 1000));
      t.latest = sample;
      if (!targets.has(row.id)) return;
      store.sandboxMetrics.record(row.id, row.teamID, sample);
      if (!t.health.up) log.info({ sandboxID: row.id }, "envd answers /metrics again");
      if (!t.health.up) t.health = { up: true, since: clock() };
    } catch (err) {
      counters.failures++;
      if (t.health.up) log.warn({ sandboxID: row.id, err: (err as Error).message }, "envd does not answer /metrics; the sandbox is marked unresponsive");
      t.health = { up: false, since: t.health.up ? clock() : t.health.since, error: (err as Error).message };
    } finally {
      t.inflight = false;
    }
  };

  const poller: EnvdPoller = {
    async poll() {
      counters.rounds++;
      const rows = store.sandboxes.all().filter((r) => r.state === "running" && r.ip);
      const live = new Set(rows.map((r) => r.id));
      for (const [id, t] of targets) {
        if (live.has(id)) continue;
        t.agent.destroy();
        targets.delete(id);
      }
      const round: Promise<void>[] = [];
      for (const row of rows) {
        let t = targets.get(row.id);
        if (!t) {
          t = { agent: new Agent({ keepAlive: true, maxSockets: 1 }), inflight: false, health: { up: true, since: clock() } };
          targets.set(row.id, t);
        }
        if (!t.inflight) round.push(pollOne(row, t));
      }
      await Promise.all(round);
    },

    health: (id) => targets.get(id)?.health,
    latest: (id) => targets.get(id)?.latest,
    stats: () => ({ ...counters }),

    start() {
      if (timer) return;
      timer = setInterval(() => {
        poller.poll().catch((err: Error) => log.error({ err: err.message }, "sandbox metrics poll failed"));
      }, POLL_EVERY_MS);
      timer.unref();
    },

    stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
      for (const t of targets.values()) t.agent.destroy();
      targets.clear();
    },
  };
  return poller;
}

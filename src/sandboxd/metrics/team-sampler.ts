import type { Logger } from "../log.js";
import type { Store } from "../store/store.js";
import { COMPACT_RES, RAW_RES } from "../store/team-metrics.js";

/** How long raw 5 s samples are kept before they are folded into 5-minute rows. */
export const RAW_KEEP_S = 24 * 3600;
/** Compaction and retention run at most this often. */
const MAINTAIN_EVERY_S = 600;

/** Milliseconds since the epoch; injectable so bucket math can be tested on synthetic timelines. */
export type Clock = () => number;

/** The team series: sampled every RAW_RES seconds, compacted after a day, dropped after the retention. */
export interface TeamSampler {
  /** Counts one started sandbox for a team (written with the next tick). */
  started(teamID: string): void;
  /** Takes one sample now: the live gauge of every team that has sandboxes (or had at the last tick) and the starts since. */
  tick(): void;
  /** Folds raw rows older than a day into 5-minute rows and deletes rows past the retention. */
  maintain(): void;
  /** Starts sampling every RAW_RES seconds. */
  start(): void;
  stop(): void;
  /** Sandboxes started per team since this process started (the Prometheus counter). */
  startedTotals(): Map<string, number>;
}

/** The sampler over the store; `retentionS` bounds how long any team row is kept. */
export function createTeamSampler(opts: { store: Store; log: Logger; retentionS: number; clock?: Clock }): TeamSampler {
  const { store, log, retentionS } = opts;
  const clock = opts.clock ?? Date.now;
  const pending = new Map<string, number>();
  const totals = new Map<string, number>();
  let lastLive = new Set<string>();
  let lastMaintain = -Infinity;
  let timer: NodeJS.Timeout | undefined;

  const sampler: TeamSampler = {
    started(teamID) {
      pending.set(teamID, (pending.get(teamID) ?? 0) + 1);
      totals.set(teamID, (totals.get(teamID) ?? 0) + 1);
    },

    tick() {
      const nowS = Math.floor(clock() / 1000);
      const ts = Math.floor(nowS / RAW_RES) * RAW_RES;
      const live = store.teamMetrics.liveByTeam();
      // A team whose last sandbox went is written once more with 0, so charts come back down.
      const teams = new Set([...live.keys(), ...pending.keys(), ...lastLive]);
      store.transaction(() => {
        for (const team of teams) store.teamMetrics.record(team, ts, live.get(team) ?? 0, pending.get(team) ?? 0);
      });
      pending.clear();
      lastLive = new Set(live.keys());
      if (nowS - lastMaintain >= MAINTAIN_EVERY_S) sampler.maintain();
    },

    maintain() {
      const nowS = Math.floor(clock() / 1000);
      lastMaintain = nowS;
      const folded = store.teamMetrics.compact(nowS - RAW_KEEP_S);
      const pruned = store.teamMetrics.prune(nowS - retentionS);
      const sandboxRows = store.sandboxMetrics.prune(nowS - retentionS);
      if (folded + pruned + sandboxRows > 0) log.debug({ folded, pruned, sandboxRows, compactRes: COMPACT_RES }, "metrics compacted");
    },

    start() {
      if (timer) return;
      timer = setInterval(() => {
        try {
          sampler.tick();
        } catch (err) {
          log.error({ err: (err as Error).message }, "team metrics sample failed");
        }
      }, RAW_RES * 1000);
      timer.unref();
    },

    stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
    },

    startedTotals: () => new Map(totals),
  };
  return sampler;
}

import type { Client } from "@connectrpc/connect";
import { closeSync, mkdirSync, openSync } from "node:fs";
import { join } from "node:path";
import { setImmediate as tick } from "node:timers/promises";
import { EventType, type Filesystem } from "../../src/envd/gen/filesystem/filesystem_pb.js";
import { probe } from "../lib/available.js";
import { withDaemon } from "../lib/daemon.js";
import { compared, single } from "../lib/rows.js";
import { median, now } from "../lib/stats.js";
import { benchTransports } from "../lib/transports.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "5-watching";
const SUBDIRS = 10;

interface Burst {
  createMs: number;
  lastEventMs: number;
  delivered: number;
  overflow?: string;
}

/**
 * Arms a recursive WatchDir on a fresh tree of SUBDIRS dirs, creates `n` empty files spread
 * over them in batches (yielding between batches so events are read meanwhile), and waits
 * until every CREATE arrived, the stream failed, or nothing came for `quietMs`.
 */
async function burst(client: Client<typeof Filesystem>, root: string, n: number, quietMs: number): Promise<Burst> {
  for (let d = 0; d < SUBDIRS; d++) mkdirSync(join(root, `d${d}`), { recursive: true });
  const ac = new AbortController();
  const seen = new Set<string>();
  let started!: () => void;
  const armed = new Promise<void>((r) => (started = r));
  let t0 = 0;
  let last = 0;
  let overflow: string | undefined;
  const reader = (async () => {
    try {
      for await (const res of client.watchDir({ path: root, recursive: true }, { signal: ac.signal })) {
        const ev = res.event;
        if (ev.case === "start") started();
        else if (ev.case === "filesystem" && ev.value.type === EventType.CREATE && ev.value.name.includes("/f")) {
          seen.add(ev.value.name);
          last = now();
          if (seen.size === n) return;
        }
      }
    } catch (err) {
      if (ac.signal.aborted) return;
      overflow = (err as Error).message;
      started();
    }
  })();
  await Promise.race([armed, reader]);
  if (overflow) throw new Error(overflow);
  t0 = now();
  for (let i = 0; i < n; i++) {
    closeSync(openSync(join(root, `d${i % SUBDIRS}`, `f${i}`), "w"));
    if (i % 500 === 499) await tick();
  }
  const createMs = now() - t0;
  // Stop when all arrived, the stream failed, or events stopped coming for quietMs.
  while (seen.size < n && overflow === undefined) {
    const before = seen.size;
    const done = await Promise.race([reader.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), quietMs))]);
    if (done || seen.size === before) break;
  }
  ac.abort();
  await reader;
  return { createMs, lastEventMs: last ? last - t0 : NaN, delivered: seen.size, overflow };
}

/** Scenario 5: a burst of file creations under a recursive WatchDir: all delivered, how fast. */
export const watching: Scenario = {
  id: ID,
  title: "Watching: burst of creates under a recursive WatchDir",
  async run(ctx: BenchContext): Promise<Row[]> {
    const n = ctx.quick ? 300 : 10_000;
    const reps = ctx.quick ? 1 : 3;
    return withDaemon(async ({ daemon }) => {
      const t = benchTransports(daemon.url);
      const rows: Row[] = [];
      for (const [codec, client] of [
        ["binary h2c", t.fs.binary],
        ["JSON HTTP/1.1", t.fs.json],
      ] as const) {
        const runs: Burst[] = [];
        for (let i = 0; i < reps; i++) {
          const root = join(ctx.tmp, `w-${codec.split(" ")[0]}-${i}`);
          runs.push(await probe("Filesystem.WatchDir", () => burst(client, root, n, 3000)));
          const r = runs[i];
          ctx.log(`${codec}: ${r.delivered}/${n} in ${r.lastEventMs.toFixed(0)} ms (creation ${r.createMs.toFixed(0)} ms)${r.overflow ? ` error: ${r.overflow}` : ""}`);
        }
        const lost = runs.filter((r) => r.delivered < n && !r.overflow).length;
        const overflowed = runs.filter((r) => r.overflow).length;
        const minDelivered = Math.min(...runs.map((r) => r.delivered));
        rows.push(
          single(ID, `WatchDir ${n} creates, ${codec}: events delivered (worst run)`, (100 * minDelivered) / n, "%", {
            text: "100 % or explicit overflow error",
            met: lost === 0,
          }, overflowed ? `${overflowed} of ${reps} run(s) ended with an explicit error: ${runs.find((r) => r.overflow)?.overflow}` : undefined),
        );
        const complete = runs.filter((r) => r.delivered === n);
        if (complete.length > 0) {
          rows.push(
            compared({
              scenario: ID,
              metric: `WatchDir ${n} creates, ${codec}: time to last event`,
              value: median(complete.map((r) => r.lastEventMs)),
              unit: "ms",
              baseline: median(complete.map((r) => r.createMs)),
              baselineLabel: "creating the files",
              target: { text: "≤ 2×", met: (x) => x.ratio <= 2 },
              note: `median over ${complete.length} complete run(s) of ${reps}`,
            }),
          );
        }
      }
      return rows;
    });
  },
};

/**
 * Scenario 15: sandboxd's API and footprint at scale without runc. An in-process sandboxd on the
 * fake runtime (the real store, sandbox service and API handler over HTTP) holds 1,000 sandboxes
 * beside one holding 100 (a full page): list v2 (page of 100) and get, interleaved, the 1,000
 * against the 100. First, churn: rounds of create → get → list → kill through the API, with the
 * process's RSS and V8 heap before, after the rounds and after an idle minute.
 */
import { Agent, request } from "node:http";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { startFakeSandboxd, type FakeSandboxd } from "../lib/fake-sandboxd.js";
import { compared, single } from "../lib/rows.js";
import { interleave, median, sleep } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "17-api-scale";

/** A keep-alive client of one fake sandboxd's API. */
function client(s: FakeSandboxd) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const call = (method: string, path: string, body?: unknown) =>
    new Promise<string>((resolve, reject) => {
      const req = request(`${s.url}${path}`, { method, agent, headers: { "x-api-key": s.apiKey, "content-type": "application/json" } }, (res) => {
        let text = "";
        res.on("data", (c: Buffer) => (text += c));
        res.on("end", () => (res.statusCode! < 300 ? resolve(text) : reject(new Error(`${method} ${path}: ${res.statusCode} ${text.slice(0, 200)}`))));
      });
      req.on("error", reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
  return { call, close: () => agent.destroy() };
}

/** RSS and V8 heap in use after a full collection, MiB. */
function memory(): { rss: number; heap: number } {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
  const m = process.memoryUsage();
  return { rss: m.rss / 2 ** 20, heap: m.heapUsed / 2 ** 20 };
}

/** The items of a list answer, checked to be a full page. */
function fullPage(text: string): void {
  const n = (JSON.parse(text) as unknown[]).length;
  if (n !== 100) throw new Error(`a list answered ${n} items, not a page of 100`);
}

async function scale(ctx: BenchContext, n: number, reps: number): Promise<Row[]> {
  const small = await startFakeSandboxd();
  const large = await startFakeSandboxd();
  try {
    const t0 = performance.now();
    const [smallIds, largeIds] = [await small.grow(100), await large.grow(n)];
    ctx.log(`${n} fake sandboxes made in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const [a, b] = [client(large), client(small)];
    const rows: Row[] = [];
    const cases = [
      { what: "list v2 page of 100", pa: "/v2/sandboxes?limit=100", pb: "/v2/sandboxes?limit=100", check: fullPage },
      { what: "list v2 page of 100 by metadata", pa: "/v2/sandboxes?limit=100&metadata=purpose%3Dbench", pb: "/v2/sandboxes?limit=100&metadata=purpose%3Dbench", check: fullPage },
      { what: "get one sandbox", pa: `/sandboxes/${largeIds[n >> 1]}`, pb: `/sandboxes/${smallIds[50]}`, check: () => undefined },
    ];
    for (const c of cases) {
      c.check(await a.call("GET", c.pa));
      c.check(await b.call("GET", c.pb));
      const r = await interleave(reps, 20, () => a.call("GET", c.pa), () => b.call("GET", c.pb));
      ctx.log(`${c.what}: ${median(r.a).toFixed(2)} ms at ${n} vs ${median(r.b).toFixed(2)} ms at 100`);
      rows.push(compared({ scenario: ID, metric: `API ${c.what}, p50, at ${n} sandboxes (fake runtime)`, value: median(r.a), unit: "ms", baseline: median(r.b), baselineLabel: "the same at 100", target: { text: "≤ 10 ms and ≤ 1.5×", met: (x) => x.value <= 10 && x.ratio <= 1.5 } }));
    }
    // what the evictor, the metrics poller and a create would cost if they still read the store
    // (they read the lifecycle's in-memory row mirror); a restart's reconcile still reads it once
    const scan = await interleave(reps / 10, 2, async () => large.store.sandboxes.all(), async () => small.store.sandboxes.all());
    ctx.log(`a read of every row: ${median(scan.a).toFixed(2)} ms at ${n} vs ${median(scan.b).toFixed(2)} ms at 100`);
    rows.push(compared({ scenario: ID, metric: `a read of every sandbox row from the store, at ${n} sandboxes (what the in-memory row mirror spares the evictor, the poller and each create; a start still reads it once)`, value: median(scan.a), unit: "ms", baseline: median(scan.b), baselineLabel: "the same at 100" }));
    a.close();
    b.close();
    return rows;
  } finally {
    await small.close();
    await large.close();
  }
}

async function churn(ctx: BenchContext, rounds: number, idleMs: number): Promise<Row[]> {
  const s = await startFakeSandboxd();
  const c = client(s);
  try {
    for (let i = 0; i < 20; i++) {
      const { sandboxID } = JSON.parse(await c.call("POST", "/sandboxes", { templateID: "base", timeout: 300 })) as { sandboxID: string };
      await c.call("DELETE", `/sandboxes/${sandboxID}`);
    }
    s.forgetCalls();
    const before = memory();
    for (let i = 0; i < rounds; i++) {
      const { sandboxID } = JSON.parse(await c.call("POST", "/sandboxes", { templateID: "base", timeout: 300, metadata: { round: String(i) } })) as { sandboxID: string };
      await c.call("GET", `/sandboxes/${sandboxID}`);
      await c.call("GET", "/v2/sandboxes");
      await c.call("DELETE", `/sandboxes/${sandboxID}`);
      s.forgetCalls();
    }
    const done = memory();
    await sleep(idleMs);
    const idle = memory();
    ctx.log(`churn: before ${JSON.stringify(before)}, after ${rounds} rounds ${JSON.stringify(done)}, idle ${JSON.stringify(idle)}`);
    const note = `RSS ${before.rss.toFixed(0)} → ${done.rss.toFixed(0)} → ${idle.rss.toFixed(0)} MiB idle (${idleMs / 1000} s); in the bench's own process`;
    return [
      compared({ scenario: ID, metric: `churn: V8 heap after ${rounds} rounds of create → get → list → kill (fake runtime)`, value: done.heap, unit: "MiB", baseline: before.heap, baselineLabel: "before the rounds", target: { text: "≤ 1.1×", met: (x) => x.ratio <= 1.1 }, note }),
      single(ID, `churn: heap growth per round`, ((done.heap - before.heap) * 1024) / rounds, "KiB", undefined, `after the idle wait: ${idle.heap.toFixed(2)} MiB heap`),
    ];
  } finally {
    c.close();
    await s.close();
  }
}

/** Scenario 15: API latency flat from 10 to 1,000 sandboxes, and a flat footprint under churn. */
export const apiScale: Scenario = {
  id: ID,
  title: "sandboxd on the fake runtime: heap under churn; list/get at 1,000 vs 100 sandboxes",
  async run(ctx) {
    const rows = await churn(ctx, ctx.quick ? 100 : 1000, ctx.quick ? 2_000 : 60_000);
    rows.push(...(await scale(ctx, ctx.quick ? 200 : 1000, ctx.quick ? 20 : 200)));
    return rows;
  },
};

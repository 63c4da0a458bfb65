// Rounds of create → command → kill on a real sandboxd (one sandbox at a time), with sandboxd's
// memory printed as it goes (RSS split into anonymous and file-backed pages, V8 heap in use and
// external memory from its /metrics) and, unless SNAPDIR is "-", heap snapshots (SIGUSR2) after
// 20 rounds and at the end for a diff (bench/tools/heap-diff.ts). A snapshot itself grows the RSS.
// Usage: node build/bench/tools/real-churn.js ROUNDS [SNAPDIR|-] [IDLE_S]
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { call, startSandboxd, type Sandboxd } from "../../test/sandboxd/helpers/sandboxd.js";
import { sandboxdPid } from "../lib/sandboxd-api.js";
import { startHolder } from "../lib/sdk-holder.js";
import { sleep } from "../lib/stats.js";

const rounds = Number(process.argv[2] ?? 100);
const dir = process.argv[3] ?? "/tmp/real-churn";
const idleS = Number(process.argv[4] ?? 60);
const snapshots = dir !== "-";
if (snapshots) mkdirSync(dir, { recursive: true });

/** VmRSS, RssAnon and RssFile of `pid`, MiB. */
function rss(pid: number): string {
  const text = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (k: string) => (Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(text)?.[1]) / 1024).toFixed(1);
  return `RSS ${kb("VmRSS")} (anon ${kb("RssAnon")}, file ${kb("RssFile")})`;
}

/** Heap in use, heap reserved, live heap (after the last full collection) and external memory as sandboxd's /metrics reports them, MiB. */
async function heap(s: Sandboxd): Promise<string> {
  const res = await call(s.port, readFileSync(s.caFile), "api.e2b.localhost", "/metrics", { headers: { "x-api-key": s.apiKey } });
  const g = (n: string) => (Number(new RegExp(`^sandboxd_process_${n}_bytes (\\S+)$`, "m").exec(res.body)?.[1]) / 2 ** 20).toFixed(1);
  const spaces = [...res.body.matchAll(/^sandboxd_process_heap_space_size_bytes\{space="(\w+)_space"\} (\S+)$/gm)].filter((m) => Number(m[2]) >= 2 ** 20);
  const bySpace = spaces.map((m) => `${m[1]} ${(Number(m[2]) / 2 ** 20).toFixed(1)}`).join(", ");
  return `heap ${g("heap_used")}/${g("heap_total")} (${bySpace}), live ${g("heap_live")}, external ${g("external_memory")}`;
}

const s = await startSandboxd({ env: snapshots ? { NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${dir}` } : {} });
try {
  const pid = sandboxdPid(s);
  const holder = startHolder(s.sdkEnv);
  const report = async (label: string) => console.log(`${label}: ${rss(pid)}, ${await heap(s)} MiB`);
  const snap = async (label: string) => {
    if (!snapshots) return;
    const before = readdirSync(dir).length;
    process.kill(pid, "SIGUSR2");
    while (readdirSync(dir).length === before) await sleep(200);
    await sleep(3000);
    console.log(`snapshot ${label}: ${readdirSync(dir).filter((f) => f.endsWith(".heapsnapshot")).sort().pop()}`);
  };
  await report("start");
  const t0 = performance.now();
  for (let i = 1; i <= rounds; i++) {
    const g = await holder.step("grow 1 1");
    if (Number(g.failed)) console.log("create failed", JSON.stringify(g.errors));
    await holder.step("check 1");
    await holder.step("kill 1");
    if (i % 10 === 0) await report(`after ${i} (${((performance.now() - t0) / i).toFixed(0)} ms a round)`);
    if (i === 20) await snap("20");
  }
  await snap(String(rounds));
  await sleep(idleS * 1000);
  await report(`idle ${idleS} s`);
  await holder.close();
} finally {
  await s.stop();
}

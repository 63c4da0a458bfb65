// Rounds of create → command → kill on a real sandboxd (one sandbox at a time), with sandboxd's
// RSS printed as it goes and heap snapshots (SIGUSR2) at two points for a diff. Usage:
// node build/bench/tools/real-churn.js ROUNDS SNAPDIR
import { mkdirSync, readdirSync } from "node:fs";
import { startSandboxd } from "../../test/sandboxd/helpers/sandboxd.js";
import { rssMiB, sandboxdPid } from "../lib/sandboxd-api.js";
import { startHolder } from "../lib/sdk-holder.js";
import { sleep } from "../lib/stats.js";

const rounds = Number(process.argv[2] ?? 100);
const dir = process.argv[3] ?? "/tmp/real-churn";
mkdirSync(dir, { recursive: true });
const s = await startSandboxd({ env: { NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${dir}` } });
try {
  const pid = sandboxdPid(s);
  const holder = startHolder(s.sdkEnv);
  const snap = async (label: string) => {
    const before = readdirSync(dir).length;
    process.kill(pid, "SIGUSR2");
    while (readdirSync(dir).length === before) await sleep(200);
    await sleep(3000);
    console.log(`snapshot ${label}: ${readdirSync(dir).filter((f) => f.endsWith(".heapsnapshot")).sort().pop()}`);
  };
  console.log(`start: RSS ${rssMiB(pid).toFixed(1)} MiB`);
  const t0 = performance.now();
  for (let i = 1; i <= rounds; i++) {
    const g = await holder.step("grow 1 1");
    if (Number(g.failed)) console.log("create failed", JSON.stringify(g.errors));
    await holder.step("check 1");
    await holder.step("kill 1");
    if (i % 10 === 0) console.log(`after ${i}: RSS ${rssMiB(pid).toFixed(1)} MiB (${((performance.now() - t0) / i).toFixed(0)} ms a round)`);
    if (i === 20) await snap("20");
  }
  await snap(String(rounds));
  await sleep(30_000);
  console.log(`idle 30 s: RSS ${rssMiB(pid).toFixed(1)} MiB`);
  await holder.close();
} finally {
  await s.stop();
}

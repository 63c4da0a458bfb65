import "./lib/native-base64.js";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { isUnavailable } from "./lib/available.js";
import { ENVD_BIN, ROOT, setDaemonEnv } from "./lib/daemon.js";
import { describe, machine } from "./lib/machine.js";
import { machineCpu, stealShare } from "./lib/procfs.js";
import { renderMarkdown, renderText, stolen } from "./lib/table.js";
import type { BenchContext, ScenarioResult } from "./lib/types.js";
import { scenarios } from "./scenarios/index.js";
import { stopAll } from "../test/sandboxd/helpers/sandboxd.js";

const HELP = `Usage: npm run bench -- [--quick] [--only ID[,ID...]] [--out FILE]
  --quick   tiny sizes, one repetition: a smoke run of every scenario in well under a minute
  --only    run only these scenarios (ids or their leading numbers, e.g. --only 1,4)
  --out     where to write the JSON results (default bench/results.json, with --quick
            bench/results-quick.json); a full run also writes the table as Markdown beside it
  --size MIB     bulk data size for scenarios 2, 3, 8 and 16 (its snapshot) instead of 1024 (quick: 8-32)
  --sandboxes N  idle sandboxes scenario 13 grows to (default 250, quick 12)
  --forks N      forks of one sandbox whose storage pool space scenario 16 measures (default 100, quick 5)
  --profile DIR  profile every daemon (CPU, whole life) into DIR/envd-<pid>.cpuprofile; SIGUSR2 to a
                 daemon writes a heap snapshot there. Summarise a profile with
                 node build/bench/tools/profile-top.js FILE.cpuprofile
Environment: ENVD_BENCH_BIN=FILE measures another build of the daemon instead of dist/envd.
Scenarios: ${scenarios.map((s) => s.id).join(", ")}
`;

/** Entry point: runs the chosen scenarios in order, prints the table, writes results.json (+ .md). */
async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { quick: { type: "boolean" }, only: { type: "string" }, out: { type: "string" }, size: { type: "string" }, sandboxes: { type: "string" }, forks: { type: "string" }, profile: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const quick = values.quick ?? false;
  const only = values.only?.split(",").map((s) => s.trim()).filter(Boolean);
  const chosen = scenarios.filter((s) => !only || only.some((o) => s.id === o || s.id.split("-")[0] === o));
  const out = values.out ?? join(ROOT, "bench", quick ? "results-quick.json" : "results.json");
  if (values.profile) {
    const dir = resolve(values.profile);
    mkdirSync(dir, { recursive: true });
    const hook = join(ROOT, "bench", "tools", "cpu-prof-hook.cjs");
    setDaemonEnv({
      NODE_OPTIONS: `--require ${hook} --heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${dir}`,
      ENVD_BENCH_PROFILE_DIR: dir,
    });
  }
  const tmp = mkdtempSync(join(tmpdir(), "envd-bench-"));
  // The daemon serves requests as `user` by default: let it into the scratch trees.
  chmodSync(tmp, 0o755);
  const m = machine(ROOT);
  process.stdout.write(`envd benchmark (${quick ? "quick" : "full"}) of ${ENVD_BIN} on ${describe(m)}\n`);
  const results: ScenarioResult[] = [];
  const cleanup = () => rmSync(tmp, { recursive: true, force: true });
  // Told to end mid-run (Ctrl-C, or a harness's timeout): no sandboxd a scenario started outlives the run.
  for (const [sig, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    process.once(sig, () => {
      void stopAll().finally(() => {
        cleanup();
        process.exit(code);
      });
    });
  }
  try {
    for (const s of chosen) {
      const t0 = performance.now();
      const cpu0 = machineCpu();
      const ctx: BenchContext = {
        quick,
        sizeBytes: values.size ? Number(values.size) * 2 ** 20 : undefined,
        sandboxes: values.sandboxes ? Number(values.sandboxes) : undefined,
        forks: values.forks ? Number(values.forks) : undefined,
        tmp: join(tmp, s.id),
        log: (msg) => process.stderr.write(`  [${s.id}] ${msg}\n`),
      };
      mkdirSync(ctx.tmp, { mode: 0o755 });
      process.stderr.write(`▶ ${s.id}: ${s.title}\n`);
      const r: ScenarioResult = { id: s.id, title: s.title, status: "ok", seconds: 0, rows: [] };
      try {
        r.rows = await s.run(ctx);
      } catch (err) {
        r.status = isUnavailable(err) ? "not available" : "error";
        r.error = (err as Error)?.message ?? String(err);
        r.rows = [{ scenario: s.id, metric: r.status, value: null, unit: "", verdict: "", note: r.error }];
        if (r.status === "error") process.stderr.write(`  [${s.id}] ${(err as Error)?.stack ?? String(err)}\n`);
      } finally {
        rmSync(ctx.tmp, { recursive: true, force: true });
      }
      r.seconds = (performance.now() - t0) / 1000;
      r.steal = stealShare(cpu0, machineCpu());
      results.push(r);
      process.stderr.write(`  [${s.id}] ${r.status} in ${r.seconds.toFixed(1)} s; ${stolen(r.steal)}\n`);
    }
  } finally {
    cleanup();
  }
  m.load.end = loadavg()[0];
  process.stdout.write(`\n${describe(m)}\n` + renderText(results) + "\n");
  writeFileSync(out, JSON.stringify({ quick, machine: m, results }, null, 2) + "\n");
  if (!quick) writeFileSync(out.replace(/\.json$/, "") + ".md", `Machine: ${describe(m)}\n\n` + renderMarkdown(results));
  process.stdout.write(`\nwrote ${out}\n`);
  return results.some((r) => r.status === "error") ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`bench: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exit(1);
  },
);

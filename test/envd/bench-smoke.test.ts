import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./helpers/daemon.js";
import { scenarios } from "../../bench/scenarios/index.js";
import type { ScenarioResult } from "../../bench/lib/types.js";

// Runs the benchmark suite's quick form once so it cannot rot: every scenario must run to
// completion (or report its feature as not available) and leave its rows in the JSON results.
// No timing is asserted: figures on a shared test machine mean nothing.
test("npm run bench -- --quick produces a row for every scenario", { timeout: 1_500_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "envd-bench-smoke-"));
  try {
    const out = join(dir, "results.json");
    const r = spawnSync(process.execPath, [join(ROOT, "build", "bench", "run.js"), "--quick", "--out", out], {
      cwd: ROOT,
      encoding: "utf8",
      // sixteen scenarios, seven of them starting a sandboxd: ten minutes and more on a busy 2-core machine
      timeout: 1_440_000,
    });
    assert.equal(r.status, 0, `bench exited with ${r.status}:\n${r.stdout}\n${r.stderr}`);
    const { quick, results } = JSON.parse(readFileSync(out, "utf8")) as { quick: boolean; results: ScenarioResult[] };
    assert.equal(quick, true);
    assert.deepEqual(
      results.map((s) => s.id),
      scenarios.map((s) => s.id),
    );
    for (const s of results) {
      assert.notEqual(s.status, "error", `${s.id} failed: ${s.error}`);
      assert.ok(s.rows.length > 0, `${s.id} produced no rows`);
      for (const row of s.rows) {
        assert.equal(row.scenario, s.id);
        if (s.status === "ok") assert.ok(row.value === null || typeof row.value === "number", `${s.id}: ${row.metric} has no number`);
      }
    }
    assert.match(r.stdout, /metric\s+envd\s+baseline\s+ratio\s+target\s+result/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, watch } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createJsonLogger } from "../../../src/common/log.js";
import { parseConfig } from "../../../src/sandboxd/config.js";
import { MAPPED_RANGE, MAPPED_ROOT } from "../../../src/sandboxd/host/idmap.js";
import { hostLimits, IDLE_SANDBOX_MIB, limitWarnings, openFiles, raiseOpenFiles, rootInotifyInstances, sandboxesMemoryAllows } from "../../../src/sandboxd/host/limits.js";

const log = createJsonLogger({ level: "silent", fd: 2, name: "test" });
const sysctl = (name: string) => Number(readFileSync(`/proc/sys/${name.replace(/\./g, "/")}`, "utf8").trim().split(/\s+/)[0]);

/** The memory budget a `serve` with these flags and variables runs with. */
function budgetOf(args: string[], env: NodeJS.ProcessEnv = {}): number | undefined {
  const parsed = parseConfig(["serve", ...args], env, "test");
  if (!("config" in parsed)) throw new Error(parsed.print);
  return parsed.config.memoryBudgetMB;
}

describe("host limits against the sandbox budget (this machine's values, nothing changed)", () => {
  test("a memory budget set high by the variable: every limit below it is named with the value this machine has and what it caps", () => {
    const allows = sandboxesMemoryAllows(budgetOf([], { SANDBOXD_MEMORY_BUDGET_MB: "99999999" }));
    assert.equal(allows, Math.floor(99_999_999 / IDLE_SANDBOX_MIB));
    const limits = hostLimits();
    const warnings = limitWarnings(limits, allows);
    for (const name of ["kernel.pid_max", "user.max_user_namespaces"]) {
      const line = warnings.find((w) => w.startsWith(`host limit ${name} = ${sysctl(name)} `));
      assert.ok(line, `a warning names ${name} = ${sysctl(name)}:\n${warnings.join("\n")}`);
      const l = limits.find((x) => x.name === name)!;
      assert.equal(l.caps, "sandboxes");
      assert.match(line, new RegExp(`caps the sandbox budget at ${l.capsAt} sandboxes, below the ${allows} its memory allows`));
      assert.ok(l.capsAt <= sysctl(name), "a limit never leaves room for more than its value");
    }
    // inotify instances cap only the sandboxes watching files at once: an idle one holds none
    const inotify = warnings.find((w) => w.startsWith(`host limit fs.inotify.max_user_instances = ${sysctl("fs.inotify.max_user_instances")} `));
    assert.ok(inotify, warnings.join("\n"));
    assert.match(inotify, new RegExp(`lets at most \\d+ of the ${allows} sandboxes its memory allows watch files at once \\(it does not cap how many run\\)`));
    assert.equal(limits.find((l) => l.name === "fs.inotify.max_user_instances")!.caps, "sandboxes watching files");
    // permanent neighbour entries are not counted against gc_thresh3 (limits-neigh): no warning names it
    assert.ok(!warnings.some((w) => w.includes("gc_thresh3")), warnings.join("\n"));
    assert.equal(warnings.length, limits.filter((l) => l.capsAt < allows).length, "one line per capping limit");
  });

  test("root's inotify instances are counted: one this root process opens (fs.watch) adds one", () => {
    const dir = mkdtempSync(join(tmpdir(), "limits-inotify-"));
    const mapped = { base: MAPPED_ROOT, count: MAPPED_RANGE };
    const before = rootInotifyInstances(mapped);
    const w = watch(dir);
    try {
      // other processes of root may open or close instances meanwhile: look for ours among a few reads
      const seen = [0, 1, 2, 3, 4].map(() => rootInotifyInstances(mapped) - before);
      assert.ok(seen.some((d) => d >= 1), `the count went up by ${seen.join(", ")}`);
      assert.equal(hostLimits(undefined, () => 7).find((l) => l.name === "fs.inotify.max_user_instances")!.used, 7);
    } finally {
      w.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a budget of a few sandboxes, given by the flag, is capped by no limit: no warning", () => {
    const allows = sandboxesMemoryAllows(budgetOf(["--memory-budget-mb", String(4 * IDLE_SANDBOX_MIB)]));
    assert.equal(allows, 4);
    assert.deepEqual(limitWarnings(hostLimits(), allows), []);
  });

  test("without a budget, memory allows what is available above the host's floor", () => {
    assert.equal(sandboxesMemoryAllows(undefined, () => 1600), 100);
    assert.equal(sandboxesMemoryAllows(undefined, () => -5), 0);
  });

  test("sandboxd raises its own open-files soft limit to the hard one (this process's limit, not the machine's)", () => {
    const before = openFiles();
    const soft = raiseOpenFiles(log);
    const after = openFiles();
    assert.equal(after.hard, before.hard);
    assert.equal(soft, after.soft);
    if (Number.isFinite(before.hard)) assert.equal(after.soft, before.hard);
    const nofile = hostLimits().find((l) => l.name.startsWith("RLIMIT_NOFILE"))!;
    assert.equal(nofile.value, after.soft);
  });
});

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createJsonLogger } from "../../../src/common/log.js";
import { parseConfig } from "../../../src/sandboxd/config.js";
import { hostLimits, IDLE_SANDBOX_MIB, limitWarnings, openFiles, raiseOpenFiles, sandboxesMemoryAllows } from "../../../src/sandboxd/host/limits.js";

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
    for (const name of ["fs.inotify.max_user_instances", "kernel.pid_max", "net.ipv4.neigh.default.gc_thresh3"]) {
      const line = warnings.find((w) => w.startsWith(`host limit ${name} = ${sysctl(name)} `));
      assert.ok(line, `a warning names ${name} = ${sysctl(name)}:\n${warnings.join("\n")}`);
      const l = limits.find((x) => x.name === name)!;
      assert.match(line, new RegExp(`caps the sandbox budget at ${l.capsAt} sandboxes, below the ${allows} its memory allows`));
      assert.ok(l.capsAt <= sysctl(name), "a limit never leaves room for more than its value");
    }
    assert.equal(warnings.length, limits.filter((l) => l.capsAt < allows).length, "one line per capping limit");
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

/**
 * sandboxd runs with its memory settings (V8 flags, glibc's arena count) however it is started,
 * and gives memory back when it goes quiet: the launcher's exec line, the running process's
 * command line and environment, and the quiet-time collector.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startQuietCollector } from "../../../src/sandboxd/host/memory-quiet.js";
import { missingMemorySettings, SANDBOXD_MEMORY_ENV, SANDBOXD_NODE_FLAGS } from "../../../src/sandboxd/host/memory-settings.js";
import { sandboxdPid } from "../helpers/hostile.js";
import { ROOT, sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";

describe("the launchers pass sandboxd's memory settings", () => {
  let dir: string;
  before(() => {
    // dist/sandboxd copied beside a stand-in for the project's Node that prints what it was given
    dir = mkdtempSync(join(tmpdir(), "churn-launcher-"));
    mkdirSync(join(dir, "dist"));
    mkdirSync(join(dir, "node_modules", ".bin"), { recursive: true });
    copyFileSync(join(ROOT, "dist", "sandboxd"), join(dir, "dist", "sandboxd"));
    writeFileSync(join(dir, "node_modules", ".bin", "node"), '#!/bin/sh\nprintf "%s\\n" "$@"\necho "MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX-unset}"\n', { mode: 0o755 });
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const run = (env: NodeJS.ProcessEnv) => {
    const r = spawnSync(join(dir, "dist", "sandboxd"), ["serve", "--listen", "127.0.0.1:1"], { encoding: "utf8", env: { PATH: "/usr/bin:/bin", ...env } });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim().split("\n");
  };

  test("dist/sandboxd execs Node with the V8 flags before the bundle, and glibc's arena count in its environment", () => {
    const lines = run({});
    assert.deepEqual(lines.slice(0, SANDBOXD_NODE_FLAGS.length + 1), [...SANDBOXD_NODE_FLAGS, join(dir, "dist", "sandboxd.cjs")]);
    assert.deepEqual(lines.slice(SANDBOXD_NODE_FLAGS.length + 1), ["serve", "--listen", "127.0.0.1:1", `MALLOC_ARENA_MAX=${SANDBOXD_MEMORY_ENV.MALLOC_ARENA_MAX}`]);
  });

  test("an arena count already in the environment is kept", () => {
    assert.equal(run({ MALLOC_ARENA_MAX: "4" }).pop(), "MALLOC_ARENA_MAX=4");
  });

  test("the scripts' copy of the settings is the program's", () => {
    const printed = spawnSync("sh", [join(ROOT, "scripts", "launcher.sh"), "--sandboxd-memory"], { encoding: "utf8" }).stdout.split("\n");
    assert.deepEqual(printed[0].split(" "), SANDBOXD_NODE_FLAGS);
    assert.deepEqual(printed[1].split(" "), Object.entries(SANDBOXD_MEMORY_ENV).map(([k, v]) => `${k}=${v}`));
  });
});

test("missing settings: a flag of the same name or a variable already set is kept as given", () => {
  assert.deepEqual(missingMemorySettings([], {}), { flags: [...SANDBOXD_NODE_FLAGS], env: { ...SANDBOXD_MEMORY_ENV } });
  const given = missingMemorySettings(["--max_semi_space_size=8", "--expose-gc"], { MALLOC_ARENA_MAX: "1" });
  assert.deepEqual(given, { flags: [], env: {} });
  assert.deepEqual(missingMemorySettings([], { NODE_OPTIONS: "--max-semi-space-size=16  --expose-gc", MALLOC_ARENA_MAX: "8" }), { flags: [], env: {} });
});

describe("a sandboxd started as `node dist/sandboxd serve` (no flags given)", { skip: sandboxSkipReason() ?? false }, () => {
  let s: Sandboxd;
  before(async () => {
    s = await startSandboxd();
  });
  after(async () => {
    await s?.stop();
  });

  test("re-executed itself with the V8 flags on its command line and the arena count in its environment", () => {
    const pid = sandboxdPid(s);
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    const script = argv.findIndex((a) => a.endsWith("/dist/sandboxd") || a.endsWith("/sandboxd.cjs"));
    assert.ok(script > 0, argv.join(" "));
    for (const flag of SANDBOXD_NODE_FLAGS) assert.ok(argv.slice(1, script).includes(flag), `${flag} in ${argv.join(" ")}`);
    for (const [k, v] of Object.entries(SANDBOXD_MEMORY_ENV)) assert.ok(environ.includes(`${k}=${v}`), `${k}=${v} in its environment`);
    assert.ok(argv.includes("serve") && argv.includes(s.dataDir), "the same serve, same flags");
  });
});

test("the quiet-time collector collects once the event loop idles after the process grew, and the collection is reported", async () => {
  const seen: { before: number; after: number }[] = [];
  // the collector's level is taken at its start: the process grows after it, then lets go
  const collector = startQuietCollector({ periodMs: 50, quietBelow: 0.5, growthBytes: 1 << 20, onCollect: (b, a) => seen.push({ before: b, after: a }) });
  let garbage: unknown[] | undefined = Array.from({ length: 300_000 }, (_, i) => ({ i, s: `x${i}` }));
  try {
    assert.ok(garbage.length > 0);
    garbage = undefined;
    while (collector.collections() === 0) await new Promise((r) => setTimeout(r, 20));
    assert.equal(garbage, undefined);
    assert.equal(seen.length, 1);
    assert.ok(seen[0].after > 0 && seen[0].before > 0);
  } finally {
    collector.stop();
  }
});

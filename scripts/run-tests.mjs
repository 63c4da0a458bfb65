#!/usr/bin/env node
// Runs every compiled test file (build/test/**/*.test.js) with Node's test runner.
// Node 20 does not expand globs, so the list is built here. ENVD_TEST_FILTER narrows it.
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return name === "helpers" ? [] : walk(p);
    return p.endsWith(".test.js") ? [p] : [];
  });
}

const filter = process.env.ENVD_TEST_FILTER;
const files = walk("build/test").filter((f) => !filter || f.includes(filter)).sort();
if (files.length === 0) {
  console.error("no test files found under build/test");
  process.exit(1);
}
const args = ["--test", "--test-concurrency=4", "--test-timeout=600000", ...process.argv.slice(2), ...files];
const r = spawnSync(process.execPath, args, { stdio: "inherit" });
process.exit(r.status ?? 1);

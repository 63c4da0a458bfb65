/**
 * The import drawing of both programs holds: no circle between files, and no arrow between the
 * rooms the docs keep apart (docs/sandboxd.md and docs/envd.md draw the floors).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");

/** The room edges `scripts/imports.mjs` prints for `program`, and whether it found a circle. */
function drawing(program: string): { edges: Set<string>; status: number | null; out: string } {
  const r = spawnSync(process.execPath, [join(ROOT, "scripts/imports.mjs"), join(ROOT, "src", program)], { encoding: "utf8" });
  const edges = new Set([...r.stdout.matchAll(/^\s+(\S+) -> (\S+)\s/gm)].map((m) => `${m[1]} -> ${m[2]}`));
  return { edges, status: r.status, out: r.stdout + r.stderr };
}

const SANDBOXD_APART = [
  "runtime -> network", "network -> runtime", "templates -> api", "templates -> sandboxes", "templates -> proxy",
  "sandboxes -> api", "runtime -> sandboxes", "pool -> sandboxes", "store -> sandboxes", "storage -> runtime",
  "host -> runtime", "host -> network", "host -> sandboxes", "host -> templates", "host -> api", "host -> store",
];
const ENVD_APART = ["process -> http", "filesystem -> http", "stream -> http", "platform -> http", "platform -> process", "platform -> filesystem"];

for (const [program, apart] of [["sandboxd", SANDBOXD_APART], ["envd", ENVD_APART]] as const) {
  test(`${program}: no circle between files, and the rooms kept apart import nothing of each other`, () => {
    const d = drawing(program);
    assert.equal(d.status, 0, d.out);
    assert.match(d.out, /no circle between files/);
    assert.ok(d.edges.size > 10, `the drawing was read: ${d.out.slice(0, 400)}`);
    for (const e of apart) assert.ok(!d.edges.has(e), `${e} is an import the floors forbid:\n${d.out}`);
  });
}

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { ROOT } from "./helpers/daemon.js";

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

test("src/envd/gen is what buf generate makes from proto/ (fails when stale)", () => {
  const out = mkdtempSync(join(tmpdir(), "envd-gen-"));
  try {
    const template = join(out, "buf.gen.yaml");
    writeFileSync(
      template,
      readFileSync(join(ROOT, "buf.gen.yaml"), "utf8").replace("out: src/envd/gen", `out: ${join(out, "gen")}`),
    );
    execFileSync(join(ROOT, "node_modules/.bin/buf"), ["generate", "proto", "--template", template], {
      cwd: ROOT,
      env: { ...process.env, PATH: `${join(ROOT, "node_modules/.bin")}:${process.env.PATH}` },
      stdio: "pipe",
    });
    const fresh = files(join(out, "gen")).map((f) => relative(join(out, "gen"), f)).sort();
    const committed = files(join(ROOT, "src/envd/gen")).map((f) => relative(join(ROOT, "src/envd/gen"), f)).sort();
    assert.deepEqual(committed, fresh);
    for (const f of fresh) {
      assert.equal(readFileSync(join(ROOT, "src/envd/gen", f), "utf8"), readFileSync(join(out, "gen", f), "utf8"), `${f} is stale: run npm run gen`);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

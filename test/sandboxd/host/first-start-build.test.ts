// The first start on a machine builds the base template with debootstrap (a minute or more): its
// progress shows on the terminal (sandboxd's log on stderr) and in /health's 503 body until the
// 200. A fresh cache dir makes this start a first one; the real debootstrap runs from the
// machine's Debian mirror, so this test is opt-in (SANDBOXD_TEST_FIRST_BUILD=1): it costs a whole
// second base build (minutes; 13 min on a 2-core machine under a load of 18).
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { call, sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";

const skip = sandboxSkipReason() ?? (process.env.SANDBOXD_TEST_FIRST_BUILD === "1" ? undefined : "a second base build: set SANDBOXD_TEST_FIRST_BUILD=1 to run it");
let s: Sandboxd | undefined;
let cacheDir: string | undefined;
after(async () => {
  await s?.stop();
  if (cacheDir) rmSync(cacheDir, { recursive: true, force: true });
});

test("a first start's base build reports its phase and steps in /health's 503 and on the terminal, then answers 200", { skip, timeout: 1_500_000 }, async () => {
  cacheDir = mkdtempSync("/var/tmp/sandboxd-first-build-");
  s = await startSandboxd({ args: ["--cache-dir", cacheDir], wait: "lines" });
  const ca = readFileSync(s.caFile);
  const seen: string[] = [];
  for (;;) {
    const r = await call(s.port, ca, "api.e2b.localhost", "/health");
    if (r.status === 200) break;
    assert.equal(r.status, 503, r.body);
    const message = (JSON.parse(r.body) as { message: string }).message;
    if (seen.at(-1) !== message) seen.push(message);
    await new Promise((res) => setTimeout(res, 100));
  }
  const building = seen.filter((m) => m.startsWith("sandboxd is not ready: building the base template (the first start on a machine takes minutes): "));
  assert.ok(building.some((m) => /: downloading packages \(\d+ so far\)$/.test(m)), `no download steps in:\n${seen.join("\n")}`);
  assert.ok(building.some((m) => /: configuring packages \d+\/\d+, \d+%$/.test(m)), `no configure steps in:\n${seen.join("\n")}`);
  // The percent only grows.
  const percents = building.flatMap((m) => /, (\d+)%$/.exec(m)?.slice(1).map(Number) ?? []);
  assert.deepEqual(percents, [...percents].sort((a, b) => a - b), percents.join(" "));
  assert.ok(percents.at(-1)! >= 95, percents.join(" "));
  // The terminal: a log line per phase and per 10 percent, not one per package.
  const lines = s.logs().split("\n").filter((l) => l.includes('"msg":"building the base template: '));
  assert.ok(lines.some((l) => l.includes('"phase":"unpacking packages"')) && lines.some((l) => l.includes('"phase":"mapping file owners to the sandboxes\' id range"')), lines.join("\n"));
  assert.ok(lines.length < 40, `${lines.length} progress lines`);
  assert.match(s.logs(), /"msg":"base rootfs built"/);
});

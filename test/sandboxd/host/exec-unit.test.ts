import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { execTool, mustExec } from "../../../src/sandboxd/host/exec.js";
import { spawnTool } from "../../../src/sandboxd/host/spawner.js";
import { loadSpawnAddon, nativeSpawnLoaded } from "../../../src/sandboxd/host/native-spawn.js";
import { envdArtifactDir } from "../helpers/sandboxd.js";

const HOST = resolve(fileURLToPath(import.meta.url), "../../../../src/sandboxd/host");

// The same behaviour from both ways of starting a tool: worker threads first, then envd's addon
// (loaded for the rest of this process).
for (const way of ["worker threads", "envd's addon"] as const) {
  describe(`tools started through ${way}`, () => {
    const addon = way === "envd's addon" ? join(envdArtifactDir(), "inotify.node") : undefined;
    test("the way in use is the one asked for", () => {
      if (addon) assert.equal(loadSpawnAddon(addon), undefined);
      assert.equal(nativeSpawnLoaded(), !!addon);
    });
    tests(addon);
  });
}

function tests(addon: string | undefined): void {

test("a tool gets its input on stdin and its output, stderr and exit code come back", async () => {
  const r = await execTool("sh", ["-c", "cat; echo err >&2; exit 3"], { input: "line one\nline two\n" });
  assert.deepEqual(r, { code: 3, stdout: "line one\nline two\n", stderr: "err\n" });
  await assert.rejects(mustExec("sh", ["-c", "echo nope >&2; exit 1"]), /sh -c echo nope >&2; exit 1 failed: nope/);
});

test("a missing tool is named; a tool that runs too long is killed; many at once all answer", async () => {
  await assert.rejects(execTool("no-such-tool-here", []), /no-such-tool-here is not installed/);
  const slow = await execTool("sleep", ["30"], { timeoutMs: 200 });
  assert.equal(slow.code, null, "killed by its timeout");
  const many = await Promise.all(Array.from({ length: 20 }, (_, i) => execTool("echo", [String(i)])));
  assert.deepEqual(many.map((r) => r.stdout), Array.from({ length: 20 }, (_, i) => `${i}\n`));
});

test("with descriptors, output goes to them and the run ends at the tool's exit while a child keeps them open", async () => {
  const dir = mkdtempSync(join(tmpdir(), "exec-unit-"));
  try {
    const fd = openSync(join(dir, "log"), "a");
    try {
      const child = join(dir, "child.pid");
      const r = await spawnTool({ cmd: "sh", args: ["-c", `echo out; echo err >&2; (sleep 30 & echo $! > ${child}); exit 0`], fds: [fd, fd], timeoutMs: 10_000 });
      assert.equal(r.code, 0);
      process.kill(Number(readFileSync(child, "utf8").trim()), "SIGKILL");
    } finally {
      closeSync(fd);
    }
    assert.equal(readFileSync(join(dir, "log"), "utf8"), "out\nerr\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a process whose tools have all ended exits: the runner's threads do not hold it", () => {
  const script = `
    import { execTool } from ${JSON.stringify(join(HOST, "exec.js"))};
    import { loadSpawnAddon } from ${JSON.stringify(join(HOST, "native-spawn.js"))};
    ${addon ? `if (loadSpawnAddon(${JSON.stringify(addon)})) process.exit(9);` : ""}
    await execTool("true", []);
    await execTool("no-such-tool-here", []).catch(() => undefined);`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 20_000 });
  assert.equal(r.signal, null, "it ended by itself, not by the test's timeout");
  assert.equal(r.status, 0, r.stderr);
});
}

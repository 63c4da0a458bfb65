// Why fs.inotify.max_user_instances caps the sandboxes watching files, not how many run: an idle
// sandbox (its init, envd) holds no inotify instance; one that watches a directory through the
// published SDK holds one, which the kernel charges to root, the owner of its user namespace.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { sandboxSkipReason, startSandboxd, type Sandboxd } from "../helpers/sandboxd.js";
import { runSdk } from "../helpers/templates.js";

const skip = sandboxSkipReason() ?? false;
let s: Sandboxd;

before(async () => {
  if (!skip) s = await startSandboxd();
});
after(async () => {
  await s?.stop();
});

test("an idle sandbox holds no inotify instance; watching a directory takes one", { skip }, async () => {
  const got = await runSdk(s, `
    import { Sandbox } from "e2b";
    const sbx = await Sandbox.create({ timeoutMs: 120_000 });
    // from the host (this script runs there, as root): the sandbox's processes, found by its
    // cgroup, and their descriptors that are inotify instances (envd's are not readable inside)
    const { readdirSync, readFileSync, readlinkSync } = await import("node:fs");
    const procs = () => {
      for (const root of ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"]) {
        for (const parent of readdirSync(root).filter((d) => d.startsWith("sandboxd-"))) {
          try {
            return readFileSync(root + "/" + parent + "/" + sbx.sandboxId + "/cgroup.procs", "utf8").trim().split(/\\s+/).filter(Boolean);
          } catch {}
        }
      }
      throw new Error("no cgroup found for " + sbx.sandboxId);
    };
    const count = async () => procs().reduce((n, pid) => n + readdirSync("/proc/" + pid + "/fd").filter((fd) => {
      try { return readlinkSync("/proc/" + pid + "/fd/" + fd) === "anon_inode:inotify"; } catch { return false; }
    }).length, 0);
    const idle = await count();
    const handle = await sbx.files.watchDir("/tmp", () => {});
    const watching = await count();
    await handle.stop();
    await sbx.kill();
    console.log(JSON.stringify({ idle, watching }));
  `);
  assert.equal(got.idle, 0, "an idle sandbox holds no inotify instance");
  assert.ok(got.watching >= 1, `a watching sandbox holds one or more (${got.watching})`);
});

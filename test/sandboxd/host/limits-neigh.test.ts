// Why the host limits leave out net.ipv4.neigh.default.gc_thresh3: each sandbox's neighbour
// entries (the host's end and its own) are permanent, and this kernel counts only the entries it
// may collect against gc_thresh3. Checked in a scratch network namespace of its own (the neighbour
// table is the kernel's, shared by every namespace) with more permanent entries than gc_thresh3.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sandboxSkipReason } from "../helpers/sandboxd.js";

const ip = (...args: string[]) => execFileSync("ip", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

test("permanent neighbour entries past gc_thresh3 are all accepted (sandboxes are not capped by it)", { skip: sandboxSkipReason() ?? false }, () => {
  const thresh = Number(readFileSync("/proc/sys/net/ipv4/neigh/default/gc_thresh3", "utf8").trim());
  const n = thresh + 16;
  const ns = `sbtest-neigh-${process.pid}`;
  const dir = mkdtempSync(join(tmpdir(), "limits-neigh-"));
  ip("netns", "add", ns);
  try {
    ip("-n", ns, "link", "add", "n0", "type", "veth", "peer", "name", "n1");
    ip("-n", ns, "link", "set", "n0", "up");
    ip("-n", ns, "addr", "add", "10.77.0.1/16", "dev", "n0");
    const lines: string[] = [];
    for (let i = 0; i < n; i++) {
      const [hi, lo] = [Math.floor(i / 250), (i % 250) + 2];
      lines.push(`neigh replace 10.77.${hi}.${lo} lladdr 02:00:00:00:${hi.toString(16).padStart(2, "0")}:${lo.toString(16).padStart(2, "0")} dev n0 nud permanent`);
    }
    writeFileSync(join(dir, "batch"), lines.join("\n") + "\n");
    const r = spawnSync("ip", ["-n", ns, "-batch", join(dir, "batch")], { encoding: "utf8" });
    assert.equal(r.status, 0, `every permanent entry is accepted: ${r.stderr.split("\n")[0]}`);
    const kept = ip("-n", ns, "-4", "neigh", "show", "dev", "n0", "nud", "permanent").trim().split("\n").length;
    assert.equal(kept, n, `${n} permanent entries, gc_thresh3 ${thresh}`);
  } finally {
    spawnSync("ip", ["netns", "del", ns]);
    rmSync(dir, { recursive: true, force: true });
  }
});

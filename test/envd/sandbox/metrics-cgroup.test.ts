// envd's /metrics inside a container: the cgroup's limits and use stand in for the machine's when
// they are lower (cgroup v1 and v2 layouts, built as files in a temp dir), and a cgroup without
// limits (a VM, or the host's root cgroup) leaves the machine's figures.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { readCgroup } from "../../../src/envd/sandbox/cgroup-limits.js";
import { MetricsSampler, parseMeminfo } from "../../../src/envd/sandbox/metrics.js";

const MiB = 2 ** 20;

function tree(files: Record<string, string>): { root: string; set(file: string, text: string): void; done(): void } {
  const root = mkdtempSync(join(tmpdir(), "envd-cgroup-"));
  const set = (file: string, text: string) => {
    mkdirSync(join(root, file, ".."), { recursive: true });
    writeFileSync(join(root, file), text);
  };
  for (const [f, t] of Object.entries(files)) set(f, t);
  return { root, set, done: () => rmSync(root, { recursive: true, force: true }) };
}

test("cgroup v2: memory.max, memory.current, the file cache, cpu.max and usage_usec", async () => {
  const t = tree({
    "cgroup.controllers": "cpu memory pids\n",
    "memory.max": `${512 * MiB}\n`,
    "memory.current": `${100 * MiB}\n`,
    "memory.stat": `anon 73400320\nfile ${30 * MiB}\nkernel 123\n`,
    "cpu.max": "150000 100000\n",
    "cpu.stat": "usage_usec 2500000\nuser_usec 2000000\n",
  });
  try {
    assert.deepEqual(readCgroup(t.root), { memLimit: 512 * MiB, memUsage: 100 * MiB, memCache: 30 * MiB, cpus: 1.5, cpuUsageNs: 2_500_000_000 });
    t.set("memory.max", "max\n");
    t.set("cpu.max", "max 100000\n");
    const open = readCgroup(t.root);
    assert.equal(open.memLimit, undefined);
    assert.equal(open.cpus, undefined);
  } finally {
    t.done();
  }
});

test("cgroup v1: memory and cpu,cpuacct controllers; the unlimited value is no limit", async () => {
  const t = tree({
    "memory/memory.limit_in_bytes": `${256 * MiB}\n`,
    "memory/memory.usage_in_bytes": `${64 * MiB}\n`,
    "memory/memory.stat": `cache 999\nrss 1\ntotal_cache ${16 * MiB}\n`,
    "cpu,cpuacct/cpu.cfs_quota_us": "200000\n",
    "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
    "cpu,cpuacct/cpuacct.usage": "123456789\n",
  });
  try {
    assert.deepEqual(readCgroup(t.root), { memLimit: 256 * MiB, memUsage: 64 * MiB, memCache: 16 * MiB, cpus: 2, cpuUsageNs: 123456789 });
    t.set("memory/memory.limit_in_bytes", "9223372036854771712\n");
    t.set("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    const open = readCgroup(t.root);
    assert.equal(open.memLimit, undefined);
    assert.equal(open.cpus, undefined);
  } finally {
    t.done();
  }
});

test("the sampler reports a limited cgroup's memory and CPU, and the machine's without limits", async () => {
  const machine = parseMeminfo(readFileSync("/proc/meminfo", "utf8")).get("MemTotal")!;
  const t = tree({
    "cgroup.controllers": "cpu memory\n",
    "memory.max": `${512 * MiB}\n`,
    "memory.current": `${100 * MiB}\n`,
    "memory.stat": `file ${30 * MiB}\n`,
    "cpu.max": "100000 100000\n",
    "cpu.stat": "usage_usec 0\n",
  });
  try {
    const s = new MetricsSampler("/", t.root);
    s.prime();
    await new Promise((r) => setTimeout(r, 200));
    // 1 CPU's quota, of which the cgroup used 100 ms in the 200 ms (or more) since prime()
    t.set("cpu.stat", "usage_usec 100000\n");
    const m = s.sample();
    assert.equal(m.mem_total, 512 * MiB);
    assert.equal(m.mem_cache, 30 * MiB);
    assert.equal(m.mem_used, 70 * MiB);
    assert.equal(m.mem_total_mib, 512);
    if (availableParallelism() > 1) {
      assert.equal(m.cpu_count, 1);
      assert.ok(m.cpu_used_pct > 0 && m.cpu_used_pct <= 50.5, `cpu ${m.cpu_used_pct} %`);
    }
    t.set("memory.max", "max\n");
    t.set("cpu.max", "max 100000\n");
    const open = s.sample();
    assert.equal(open.mem_total, machine);
    assert.equal(open.cpu_count, availableParallelism());
  } finally {
    t.done();
  }
});

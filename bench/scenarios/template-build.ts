import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAPPED_ROOT } from "../../src/sandboxd/host/idmap.js";
import { ociConfig } from "../../src/sandboxd/runtime/oci-config.js";
import { unmount } from "../../src/sandboxd/host/mounts.js";
import { mountOverlay, rootfsLayers, STACK_SUFFIX } from "../../src/sandboxd/host/overlay.js";
import { removeCgroup } from "../../src/sandboxd/host/cgroups.js";
import { api } from "../../test/sandboxd/helpers/api-client.js";
import { baseRootfs, envdDir } from "../../test/sandboxd/helpers/runtime.js";
import { startSandboxd, type Sandboxd } from "../../test/sandboxd/helpers/sandboxd.js";
import { runSdk, waitForBuild } from "../../test/sandboxd/helpers/templates.js";
import { needSandboxes } from "../lib/available.js";
import { compared, single } from "../lib/rows.js";
import { percentile } from "../lib/stats.js";
import type { BenchContext, Row, Scenario } from "../lib/types.js";

const ID = "12-template-build";
const STEP = "mkdir -p /opt/bench && echo MARKER > /opt/bench/marker && ls /usr/bin > /opt/bench/list";

/** POSTs a v1 Dockerfile and waits for the build; the milliseconds from the request to ready. */
async function timedBuild(s: Sandboxd, ca: Buffer, alias: string, dockerfile: string): Promise<{ ms: number; finalizeMs?: number; templateID: string; cached: number }> {
  const t0 = performance.now();
  const r = await api(s, ca, "POST", "/templates", { body: { dockerfile, alias, memoryMB: 512 } });
  if (r.status !== 202) throw new Error(`build request answered ${r.status}: ${r.body}`);
  const done = await waitForBuild(s, ca, r.json.templateID, r.json.buildID);
  if (done.last.status !== "ready") throw new Error(`build failed: ${done.last.reason?.message}`);
  const ms = performance.now() - t0;
  const fin = done.logs.find((l) => l.message.startsWith("finalize: "));
  return { ms, finalizeMs: fin ? Date.now() - Date.parse(fin.timestamp) : undefined, templateID: r.json.templateID, cached: done.logs.filter((l) => l.message.startsWith("CACHED")).length };
}

/** The baseline: `runc run` of the same step on a fresh overlay over the same base rootfs. */
async function bareStep(rounds: number): Promise<number[]> {
  const rootfs = await baseRootfs();
  const envd = await envdDir();
  const ms: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const dir = mkdtempSync(join(tmpdir(), "sandboxd-bench-step-"));
    chmodSync(dir, 0o711);
    for (const d of ["upper", "work", "rootfs"]) mkdirSync(join(dir, d));
    chownSync(join(dir, "upper"), MAPPED_ROOT, MAPPED_ROOT);
    const cgroup = `/sandboxd-bench-step-${process.pid}`;
    try {
      const t0 = performance.now();
      await mountOverlay({ lower: rootfs, upper: join(dir, "upper"), work: join(dir, "work"), target: join(dir, "rootfs") });
      const cfg = ociConfig({ sandboxID: "step", rootfsDir: join(dir, "rootfs"), envdDir: envd, tiniPath: "/usr/bin/tini-static", cgroupsPath: `${cgroup}/step`, cpuCount: 2, memoryMB: 512, pidsLimit: 1024, defaultUser: "root" });
      (cfg as { process: { args: string[] } }).process.args = ["/bin/bash", "-c", STEP.replace("MARKER", `bare${i}`)];
      writeFileSync(join(dir, "config.json"), JSON.stringify(cfg));
      execFileSync("runc", ["--root", join(dir, "runc"), "run", "--bundle", dir, `step${i}`], { stdio: "ignore" });
      await unmount(join(dir, "rootfs"));
      ms.push(performance.now() - t0);
    } finally {
      await unmount(join(dir, "rootfs")).catch(() => undefined);
      removeCgroup(`${cgroup}/step`);
      removeCgroup(cgroup);
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return ms;
}

/** Disk blocks of a tree in KiB (du counts a hard-linked file once per invocation). */
function duKiB(...dirs: string[]): number[] {
  const out = execFileSync("du", ["-sk", "-x", ...dirs], { encoding: "utf8" });
  return out.trim().split("\n").map((l) => Number(l.split("\t")[0]));
}

/** Scenario 12: template builds (uncached one-RUN step, fully cached rebuild) beside runc run of the step; disk per template and per sandbox. */
export const templateBuild: Scenario = {
  id: ID,
  title: "sandboxd: template build of one RUN step and a fully cached rebuild, vs runc run of the step; template and sandbox disk",
  async run(ctx: BenchContext): Promise<Row[]> {
    needSandboxes(ctx);
    const rounds = ctx.quick ? 1 : 5;
    const s = await startSandboxd({ args: ["--network-cidr", "198.19.213.0/24"] });
    const ca = readFileSync(s.caFile);
    try {
      const fresh: number[] = [];
      const cached: number[] = [];
      const finalizes: number[] = [];
      for (let i = 0; i < rounds; i++) {
        const dockerfile = `FROM e2bdev/base\nUSER root\nRUN ${STEP.replace("MARKER", `round${i}-${Date.now()}`)}\nUSER user\n`;
        const one = await timedBuild(s, ca, `bench-step-${i}`, dockerfile);
        fresh.push(one.ms);
        if (one.finalizeMs !== undefined) finalizes.push(one.finalizeMs);
        const again = await timedBuild(s, ca, `bench-step-${i}`, dockerfile);
        if (again.cached < 2) throw new Error(`the rebuild used ${again.cached} cached layers`);
        cached.push(again.ms);
      }
      const bare = await bareStep(rounds);
      const rows: Row[] = [
        compared({ scenario: ID, metric: `build of one RUN step on base, uncached, p50 (${rounds})`, value: percentile(fresh, 50), unit: "ms", baseline: percentile(bare, 50), baselineLabel: "runc run of the step, fresh overlay", target: { text: "≤ 2000 ms", met: (r) => r.value <= 2000 }, note: finalizes.length ? `of which finalize (publishing the layer stack) to ready: ${percentile(finalizes, 50).toFixed(0)} ms` : undefined }),
        compared({ scenario: ID, metric: `rebuild with every layer cached, p50 (${rounds})`, value: percentile(cached, 50), unit: "ms", baseline: percentile(bare, 50), baselineLabel: "runc run of the step, fresh overlay" }),
      ];
      // Disk: the template's own layers beside the base (its rootfs is a stack of links to them).
      const base = await baseRootfs();
      const stacks = readdirSync(join(s.dataDir, "templates", "rootfs")).filter((n) => n.endsWith(STACK_SUFFIX));
      if (stacks.length !== rounds) throw new Error(`expected ${rounds} published layer stacks, found ${stacks.length}`);
      const own = rootfsLayers(join(s.dataDir, "templates", "rootfs", stacks[0])).slice(1);
      const [baseKiB, ...layerKiB] = duKiB(base, ...own);
      rows.push(single(ID, "template rootfs: disk not shared with the base", layerKiB.reduce((a, b) => a + b, 0) / 1024, "MiB", undefined, `base rootfs ${(baseKiB / 1024).toFixed(0)} MiB; the template is its ${own.length} layer(s) over it`));
      // Disk per extra sandbox: its overlay upper after create and one command.
      const n = ctx.quick ? 2 : 5;
      const ids = (await runSdk(s, `
        import { Sandbox } from "e2b";
        const all = [];
        for (let i = 0; i < ${n}; i++) { const sbx = await Sandbox.create("bench-step-0", { timeoutMs: 300_000 }); await sbx.commands.run("echo hi > /tmp/hi"); all.push(sbx.sandboxId); }
        console.log(JSON.stringify(all));
      `)) as string[];
      const uppers = duKiB(...ids.map((id) => join(s.dataDir, "sandboxes", id, "disk", "upper")));
      rows.push(single(ID, `disk per extra sandbox (its upper layer), median of ${n}`, percentile(uppers, 50), "KiB", undefined, "the template rootfs is the shared read-only lower"));
      return rows;
    } finally {
      await s.stop();
    }
  },
};

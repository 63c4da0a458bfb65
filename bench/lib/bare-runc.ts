/**
 * The floor of every sandbox start: `runc run` of the base rootfs (same overlay, namespaces,
 * seccomp and limits as a sandbox) running `/bin/true`, timed per run.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { removeCgroup } from "../../src/sandboxd/host/cgroups.js";
import { MAPPED_ROOT } from "../../src/sandboxd/host/idmap.js";
import { unmount } from "../../src/sandboxd/host/mounts.js";
import { mountOverlay } from "../../src/sandboxd/host/overlay.js";
import { ociConfig } from "../../src/sandboxd/runtime/oci-config.js";
import { baseRootfs, envdDir } from "../../test/sandboxd/helpers/runtime.js";

/** Milliseconds of each of `rounds` `runc run true` on one overlay of the base rootfs; removes what it made. */
export async function bareRuncTrue(rounds: number): Promise<number[]> {
  const rootfs = await baseRootfs();
  const envd = await envdDir();
  const dir = mkdtempSync(join(tmpdir(), "sandboxd-bench-bare-"));
  chmodSync(dir, 0o711);
  for (const d of ["upper", "work", "rootfs"]) mkdirSync(join(dir, d));
  chownSync(join(dir, "upper"), MAPPED_ROOT, MAPPED_ROOT);
  await mountOverlay({ lower: rootfs, upper: join(dir, "upper"), work: join(dir, "work"), target: join(dir, "rootfs") });
  const cgroup = `/sandboxd-bench-bare-${process.pid}`;
  try {
    const cfg = ociConfig({ sandboxID: "bare", rootfsDir: join(dir, "rootfs"), envdDir: envd, tiniPath: "/usr/bin/tini-static", cgroupsPath: `${cgroup}/bare`, cpuCount: 2, memoryMB: 512, pidsLimit: 1024, defaultUser: "root" });
    (cfg as { process: { args: string[] } }).process.args = ["/bin/true"];
    writeFileSync(join(dir, "config.json"), JSON.stringify(cfg));
    const ms: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const t0 = performance.now();
      execFileSync("runc", ["--root", join(dir, "runc"), "run", "--bundle", dir, `bare${i}`], { stdio: "ignore" });
      ms.push(performance.now() - t0);
    }
    return ms;
  } finally {
    await unmount(join(dir, "rootfs")).catch(() => undefined);
    removeCgroup(`${cgroup}/bare`);
    removeCgroup(cgroup);
    rmSync(dir, { recursive: true, force: true });
  }
}

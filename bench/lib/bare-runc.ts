/**
 * The floor of every sandbox start: `runc run` of the base rootfs (same overlay, namespaces,
 * seccomp and limits as a sandbox) running `/bin/true`, timed per run; and the same run with
 * parts of the sandbox's config taken out one at a time, to show what of runc's time the config
 * costs.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { removeCgroup } from "../../src/sandboxd/host/cgroups.js";
import { MAPPED_ROOT } from "../../src/sandboxd/host/idmap.js";
import { unmount } from "../../src/sandboxd/host/mounts.js";
import { mountOverlay, overlayOptions } from "../../src/sandboxd/host/overlay.js";
import { ociConfig } from "../../src/sandboxd/runtime/oci-config.js";
import { baseRootfs, envdDir } from "../../test/sandboxd/helpers/runtime.js";

type Config = Record<string, unknown> & { process: Record<string, unknown>; linux: Record<string, unknown>; mounts: { destination: string }[] };

/** One way of running `true`: a name, the config it runs, and runc's extra flags or a wrapper. */
interface Variant {
  name: string;
  edit?: (c: Config) => void;
  flags?: string[];
  /** The sandbox's own path: a private mount namespace, the overlay mounted there by a shell, then runc. */
  wrapped?: boolean;
}

/** The sandbox's config, then each part of it taken out, then all of them (a minimal container). */
export const RUNC_VARIANTS: Variant[] = [
  { name: "the sandbox's config" },
  { name: "the sandbox's path: unshare + sh + overlay mount + runc run --no-new-keyring", wrapped: true, flags: ["--no-new-keyring"] },
  { name: "--no-new-keyring", flags: ["--no-new-keyring"] },
  { name: "without seccomp", edit: (c) => delete c.linux.seccomp },
  { name: "without the user namespace", edit: (c) => {
    delete c.linux.uidMappings;
    delete c.linux.gidMappings;
    c.linux.namespaces = (c.linux.namespaces as { type: string }[]).filter((n) => n.type !== "user");
  } },
  { name: "without cgroup limits", edit: (c) => (c.linux.resources = { devices: [{ allow: false, access: "rwm" }] }) },
  { name: "without masked and read-only paths", edit: (c) => {
    delete c.linux.maskedPaths;
    delete c.linux.readonlyPaths;
  } },
  { name: "only /proc and /dev mounted", edit: (c) => (c.mounts = c.mounts.filter((m) => m.destination === "/proc" || m.destination === "/dev")) },
  { name: "minimal: pid, mount and uts namespaces, /proc and /dev, no seccomp, limits, masks or user namespace", flags: ["--no-new-keyring"], edit: (c) => {
    c.linux = { namespaces: [{ type: "pid" }, { type: "mount" }, { type: "uts" }], cgroupsPath: c.linux.cgroupsPath, resources: { devices: [{ allow: false, access: "rwm" }] } };
    c.mounts = c.mounts.filter((m) => m.destination === "/proc" || m.destination === "/dev");
    delete c.process.rlimits;
    delete c.process.oomScoreAdj;
  } },
];

/**
 * Milliseconds of each of `rounds` runs of `true` per variant, the variants interleaved round by
 * round (so load shifts hit them alike); removes what it made.
 */
export async function runcVariants(rounds: number, variants: Variant[] = RUNC_VARIANTS): Promise<Map<string, number[]>> {
  const rootfs = await baseRootfs();
  const envd = await envdDir();
  const dir = mkdtempSync(join(tmpdir(), "sandboxd-bench-bare-"));
  chmodSync(dir, 0o711);
  for (const d of ["upper", "work", "rootfs", "upper2", "work2"]) mkdirSync(join(dir, d));
  chownSync(join(dir, "upper"), MAPPED_ROOT, MAPPED_ROOT);
  chownSync(join(dir, "upper2"), MAPPED_ROOT, MAPPED_ROOT);
  const target = join(dir, "rootfs");
  const cgroup = `/sandboxd-bench-bare-${process.pid}`;
  const out = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  let mounted = false;
  try {
    const bundles = variants.map((v, i) => {
      const bundle = join(dir, `b${i}`);
      mkdirSync(bundle);
      const cfg = ociConfig({ sandboxID: "bare", rootfsDir: target, envdDir: envd, tiniPath: "/usr/bin/tini-static", cgroupsPath: `${cgroup}/bare`, cpuCount: 2, memoryMB: 512, pidsLimit: 1024, defaultUser: "root" }) as Config;
      cfg.process.args = ["/bin/true"];
      v.edit?.(cfg);
      writeFileSync(join(bundle, "config.json"), JSON.stringify(cfg));
      return bundle;
    });
    // the wrapped variant mounts its own overlay (its own upper and work) in its private namespace
    const wrappedOptions = overlayOptions({ lower: rootfs, upper: join(dir, "upper2"), work: join(dir, "work2") }, ["nodev"]);
    await mountOverlay({ lower: rootfs, upper: join(dir, "upper"), work: join(dir, "work"), target });
    mounted = true;
    for (let r = 0; r < rounds; r++) {
      variants.forEach((v, i) => {
        const runc = ["runc", "--root", join(dir, "runc"), "run", ...(v.flags ?? []), "--bundle", bundles[i], `bare${r}x${i}`];
        const argv = v.wrapped ? ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", `mount -t overlay overlay -o "$1" "$2" && shift 2 && exec "$@"`, "sh", wrappedOptions, target, ...runc] : runc;
        const t0 = performance.now();
        execFileSync(argv[0], argv.slice(1), { stdio: ["ignore", "ignore", "pipe"] });
        out.get(v.name)!.push(performance.now() - t0);
      });
    }
    return out;
  } finally {
    if (mounted) await unmount(target).catch(() => undefined);
    removeCgroup(`${cgroup}/bare`);
    removeCgroup(cgroup);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Milliseconds of each of `rounds` `runc run true` on one overlay of the base rootfs with the sandbox's config. */
export async function bareRuncTrue(rounds: number): Promise<number[]> {
  return (await runcVariants(rounds, RUNC_VARIANTS.slice(0, 1))).get(RUNC_VARIANTS[0].name)!;
}

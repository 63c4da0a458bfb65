import { readFileSync } from "node:fs";
import { execTool, mustExec } from "./exec.js";

/** Whether `dir` is a mount point now. */
export function isMounted(dir: string): boolean {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .some((l) => l.split(" ")[4]?.replace(/\\040/g, " ") === dir);
}

/** The directories of one overlay mount. */
export interface OverlayDirs {
  lower: string;
  upper: string;
  work: string;
}

/** mount(8)'s -o for an overlay of the read-only `lower` and a writable `upper`, with extra flags first. */
export function overlayOptions(p: OverlayDirs, flags: string[] = []): string {
  for (const d of [p.lower, p.upper, p.work]) {
    // overlayfs splits its options on commas and lowerdir on colons
    if (/[,:\s\\]/.test(d)) throw new Error(`overlay directory ${JSON.stringify(d)} contains a comma, colon, backslash or space`);
  }
  return [...flags, `lowerdir=${p.lower}`, `upperdir=${p.upper}`, `workdir=${p.work}`].join(",");
}

/**
 * Mounts an overlay of the shared read-only `lower` and a per-sandbox `upper` at `target`, in
 * the host's mount namespace and so nosuid,nodev: the host never runs what a sandbox wrote.
 */
export async function mountOverlay(p: OverlayDirs & { target: string; nice?: number }): Promise<void> {
  await mustExec("mount", ["-t", "overlay", "overlay", "-o", overlayOptions(p, ["nosuid", "nodev"]), p.target], { nice: p.nice });
}

/** Unmounts `target` when mounted (lazily when still busy). */
export async function unmount(target: string): Promise<void> {
  for (let i = 0; i < 8 && isMounted(target); i++) {
    const r = await execTool("umount", [target]);
    if (r.code !== 0 && isMounted(target)) await execTool("umount", ["-l", target]);
  }
  if (isMounted(target)) throw new Error(`${target} is still mounted`);
}

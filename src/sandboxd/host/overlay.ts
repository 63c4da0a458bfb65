/** Overlay mounts of a shared read-only layer and a writable one: their options and the host-side mount. */
import { mustExec } from "./exec.js";

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

import type { Store } from "../store/store.js";
import { BuildFailure } from "./executor.js";
import type { BuildSpec } from "./steps.js";

/** Image names that mean the base rootfs (Debian bookworm with E2B's base tools): no registry is reachable. */
const LOCAL_IMAGES = [/^(docker\.io\/)?e2bdev\/base(:[\w.-]+)?$/, /^(docker\.io\/)?(library\/)?debian:(bookworm|12)([\w.-]*)$/];

/**
 * The rootfs a build starts from: `fromTemplate` → that template's current rootfs (the team's
 * own or a published one, ready); `fromImage` → the base rootfs for e2bdev/base and debian:bookworm*, else a build
 * error (sandboxd pulls no images); neither → the base rootfs (the SDK's default is e2bdev/base).
 */
export function resolveBase(store: Store, teamID: string, spec: BuildSpec, baseRootfs: string): string {
  if (spec.fromTemplate) {
    const ref = spec.fromTemplate.toLowerCase().replace(/^.*\//, "").replace(/:default$/, "");
    const t = store.templates.get(ref) ?? store.templates.byAlias(ref);
    if (!t || (t.teamID !== teamID && t.public !== true)) throw new BuildFailure(`base template '${spec.fromTemplate}' not found`, "base");
    if (!t.rootfs) throw new BuildFailure(`base template '${spec.fromTemplate}' has no ready build`, "base");
    return t.rootfs;
  }
  const image = spec.fromImage?.trim().toLowerCase();
  if (!image || LOCAL_IMAGES.some((re) => re.test(image))) return baseRootfs;
  throw new BuildFailure(
    `base image '${spec.fromImage}' is not available: sandboxd has no image registry; use e2bdev/base or debian:bookworm (both the local Debian bookworm base), or fromTemplate`,
    "base",
  );
}

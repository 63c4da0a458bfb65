import { MIN_DISK_MB } from "../host/disk.js";
import { rootfsProbe } from "../host/overlay.js";
import type { SandboxSpec } from "./runtime.js";

/** A sandbox ID the runtime accepts (a hostname label; also names its directory and cgroup). */
export const SANDBOX_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;
/** Niceness of the host-side tools that make a sandbox started ahead of need. */
export const BACKGROUND_NICE = 10;

/** Rejects a spec the runtime cannot make, with a message naming the field. */
export function checkSpec(spec: SandboxSpec): void {
  if (!SANDBOX_ID.test(spec.sandboxID)) throw new Error(`sandbox ID ${JSON.stringify(spec.sandboxID)} must be 1-63 of [a-z0-9-]`);
  if (!(spec.cpuCount > 0 && spec.cpuCount <= 256)) throw new Error(`cpuCount ${spec.cpuCount} must be in (0, 256]`);
  if (!(Number.isInteger(spec.memoryMB) && spec.memoryMB >= 64)) throw new Error(`memoryMB ${spec.memoryMB} must be an integer ≥ 64`);
  if (!(Number.isInteger(spec.diskSizeMB) && spec.diskSizeMB >= MIN_DISK_MB && spec.diskSizeMB <= 16 * 2 ** 20)) throw new Error(`diskSizeMB ${spec.diskSizeMB} must be an integer from ${MIN_DISK_MB} to ${16 * 2 ** 20}`);
  // resolved as the sandbox will see it: a link in the template never leads the host out of it
  if (rootfsProbe(spec.rootfs, "bin/sh") !== "file") throw new Error(`template rootfs ${spec.rootfs} has no /bin/sh`);
}

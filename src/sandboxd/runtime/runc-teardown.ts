// Taking a runc sandbox apart: each piece on its own (container, network, rootfs, disk, cgroup,
// files, slot), so that a half-made sandbox goes as completely as a whole one.
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { removeCgroup } from "../host/cgroups.js";
import { isMounted, unmount } from "../host/mounts.js";
import type { SandboxNetwork } from "../host/sandbox-network.js";
import type { RuncCli } from "./runc-cli.js";
import type { SandboxDisks } from "./runc-disk.js";

/** What a teardown acts on: the runtime's parts and the sandbox's directory and cgroup. */
export interface TeardownParts {
  runc: RuncCli;
  network: SandboxNetwork;
  disks: SandboxDisks;
  /** The sandbox's directory (`<data dir>/sandboxes/<id>`). */
  dir: string;
  /** The sandbox's cgroup path. */
  cgroup: string;
}

/**
 * Removes whatever exists of sandbox `id`; `keepDisk` leaves its disk image in the storage pool
 * (unmounted). Throws, naming every step that failed, when something is left behind.
 */
export async function teardownSandbox(p: TeardownParts, id: string, keepDisk: boolean): Promise<void> {
  const errors: string[] = [];
  const step = async (what: string, fn: () => unknown) => {
    try {
      await fn();
    } catch (err) {
      errors.push(`${what}: ${(err as Error).message}`);
    }
  };
  await step("container", () => p.runc.destroy(id));
  // with the processes gone, the network and the layer come apart independently
  await Promise.all([
    step("network", () => p.network.detach(id)),
    (async () => {
      await step("rootfs", () => unmount(join(p.dir, "rootfs")));
      await step("disk", () => p.disks.detach(join(p.dir, "disk")));
      if (!keepDisk) await step("pool disk", () => p.disks.remove(id, join(p.dir, "disk")));
      await step("cgroup", () => removeCgroup(p.cgroup));
      await step("files", async () => {
        // never into a mount: the layer is removed only once nothing is mounted on it
        for (const m of ["rootfs", "disk"]) if (isMounted(join(p.dir, m))) throw new Error(`${m} still mounted; files kept`);
        await rm(p.dir, { recursive: true, force: true });
      });
    })(),
  ]);
  await step("slot", () => p.network.release(id));
  if (errors.length > 0) throw new Error(`removing sandbox ${id} left something behind: ${errors.join("; ")}`);
}

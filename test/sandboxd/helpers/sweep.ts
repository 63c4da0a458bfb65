// What a stopped test sandboxd may leave on its data dir, removed with the runtime's own sweep.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

/**
 * Removes whatever sandboxes a stopped sandboxd left on `dataDir` (ones its API could not kill:
 * frozen, or of a revoked key): containers, overlay mounts, veths, slots and the instance's
 * cgroups, with the runtime's own sweep.
 */
export async function sweepAll(dataDir: string, cidr: string, envdDir: string): Promise<void> {
  // never remove the data dir through a storage pool still mounted in it
  if (!existsSync(join(dataDir, "runc"))) return void spawnSync("umount", ["-l", join(dataDir, "storage")], { stdio: "ignore" });
  const { createRuncRuntime } = await import("../../../src/sandboxd/runtime/runc.js");
  const { createSlotNetwork } = await import("../../../src/sandboxd/network/slot-network.js");
  const { createJsonLogger } = await import("../../../src/common/log.js");
  const log = createJsonLogger({ level: "silent", fd: 2, name: "test" });
  const { StoragePool } = await import("../../../src/sandboxd/storage/pool.js");
  const storage = await StoragePool.open({ dataDir, sizeMB: 1024, log });
  try {
    const rt = createRuncRuntime({ dataDir, envdDir, network: createSlotNetwork({ dataDir, networkCidr: cidr, log }), storage, log });
    await rt.sweep(new Set());
    // the host firewall of an instance that died without removing it
    await rt.close?.();
  } finally {
    if (!(await storage.close())) spawnSync("umount", ["-l", join(dataDir, "storage")]);
  }
}

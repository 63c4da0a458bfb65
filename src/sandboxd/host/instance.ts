/** The short key of one sandboxd instance on this host, which names the host objects it makes. */
import { createHash } from "node:crypto";
import { resolve } from "node:path";

/**
 * 10 hex of a hash of the data directory: it names the instance's cgroup parent, veths and nft
 * table, so that two instances on one host never share one and a restarted one finds its own.
 */
export function instanceKey(dataDir: string): string {
  return createHash("sha256").update(resolve(dataDir)).digest("hex").slice(0, 10);
}

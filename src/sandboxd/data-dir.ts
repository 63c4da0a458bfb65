import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Logger } from "./log.js";
import { MAPPED_ROOT } from "./host/idmap.js";

/** The data dir's mode: its owner (root) and the sandboxes' mapped root group may enter it, nobody else. */
export const DATA_DIR_MODE = 0o710;

/**
 * Makes the data dir private: owned by root with the sandboxes' mapped root as its group, mode
 * 0710. It holds the store (and the install secret every token derives from), the API key and
 * the CA's key, so no other host user may enter it; the group's search bit alone lets runc,
 * working as sandbox root, reach each sandbox's bundle under `sandboxes/` (it lists nothing).
 * A directory that already holds other files and no store is refused: tightening a shared
 * directory such as /tmp would break the host.
 */
export function prepareDataDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const entries = readdirSync(dir);
  if (entries.length > 0 && !entries.includes("sandboxd.db")) {
    throw new Error(`--data-dir ${resolve(dir)} already holds other files and no sandboxd store; sandboxd makes its data dir private (mode 710): give it a directory of its own`);
  }
  try {
    chownSync(dir, 0, MAPPED_ROOT);
    chmodSync(dir, DATA_DIR_MODE);
  } catch (err) {
    throw new Error(`cannot make the data dir ${resolve(dir)} private (owner root, group ${MAPPED_ROOT}, mode 710): ${(err as Error).message}; sandboxd runs as root`);
  }
}

/** The paths under `dir` that something is mounted on or beneath (host root must not delete through a mount). */
function mountsUnder(dir: string): string[] {
  const prefix = resolve(dir) + "/";
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[4]?.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((mp): mp is string => !!mp && (mp + "/").startsWith(prefix));
}

/**
 * Removes what a crash left half-made in the data dir: a secret file written under a temporary
 * name (`api-key.tmp-<pid>`) and the TLS scratch directories that may hold a private key
 * (`tls/.ca-<pid>`, `tls/.server-<pid>`). Links are removed, never followed.
 */
export function sweepTemporaries(dataDir: string, log: Logger): void {
  const swept: string[] = [];
  const sweep = (dir: string, pattern: RegExp) => {
    if (!existsSync(dir)) return;
    for (const name of readdirSync(dir)) {
      if (!pattern.test(name)) continue;
      rmSync(join(dir, name), { recursive: true, force: true });
      swept.push(join(dir, name));
    }
  };
  sweep(dataDir, /^api-key\.tmp-\d+$/);
  sweep(join(dataDir, "tls"), /^\.(ca|server)-\d+$/);
  if (swept.length > 0) log.info({ paths: swept }, "removed files a crash left half-written");
}

/**
 * Removes entries of `<dataDir>/sandboxes` that are no sandbox the runtime could know (its own
 * sweep removes every sandbox-named one without a row): left by a crash or planted, they would
 * hold disk that no budget counts. One with something mounted beneath it is left, with a warning.
 */
export function sweepStrangers(dataDir: string, isSandboxID: (name: string) => boolean, log: Logger): void {
  const dir = join(dataDir, "sandboxes");
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    if (isSandboxID(name)) continue;
    const path = join(dir, name);
    const mounts = lstatSync(path).isDirectory() ? mountsUnder(path) : [];
    if (mounts.length > 0) {
      log.warn({ path, mounts }, "left a stray entry of the sandboxes directory: something is mounted beneath it");
      continue;
    }
    rmSync(path, { recursive: true, force: true });
    log.info({ path }, "removed a stray entry of the sandboxes directory");
  }
}

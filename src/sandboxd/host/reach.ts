/** Whether the sandboxes' mapped root can reach a host path (every ancestor searchable). */
import { statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { MAPPED_RANGE, MAPPED_ROOT } from "./idmap.js";

/**
 * Throws when the sandboxes' mapped root could not reach `path`: runc prepares the rootfs and
 * bind mounts from inside the user namespace, where host-owned directories grant only their
 * "other" permissions, so every ancestor needs o+x (e.g. a data dir under /root fails).
 */
export function assertReachableBySandboxes(path: string, what: string): void {
  for (let dir = dirname(resolve(path)); ; dir = dirname(dir)) {
    const st = statSync(dir, { throwIfNoEntry: false });
    if (!st) throw new Error(`${what} ${path} does not exist (${dir} is missing)`);
    const mapped = st.uid >= MAPPED_ROOT && st.uid < MAPPED_ROOT + MAPPED_RANGE;
    const viaGroup = st.gid === MAPPED_ROOT && (st.mode & 0o010) !== 0;
    if (!mapped && !viaGroup && (st.mode & 0o001) === 0) {
      throw new Error(`${what} ${path} is not reachable by sandbox root (host uid ${MAPPED_ROOT}): ${dir} has mode ${(st.mode & 0o777).toString(8)}; run chmod o+x ${dir} or choose another location`);
    }
    if (dir === "/") return;
  }
}

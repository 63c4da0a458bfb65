// The pool's directories: root-only (0700), real directories (never links), and a `tmp/` whose
// contents are by definition half-made and are swept whenever the pool opens.
import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

/** The pool's subdirectories: disk images, snapshot images, golden images, files being made. */
export interface PoolDirs {
  disks: string;
  snapshots: string;
  golden: string;
  tmp: string;
}

/** The subdirectories of the pool at `root`. */
export function poolDirs(root: string): PoolDirs {
  return { disks: join(root, "disks"), snapshots: join(root, "snapshots"), golden: join(root, "golden"), tmp: join(root, "tmp") };
}

/** Makes (or checks) the pool's directories under `root`, owned by root with mode 0700, and empties `tmp/`; returns what it swept. */
export function prepareLayout(root: string): { dirs: PoolDirs; swept: string[] } {
  const dirs = poolDirs(root);
  for (const d of [root, ...Object.values(dirs)]) {
    mkdirSync(d, { mode: 0o700, recursive: true });
    if (!lstatSync(d).isDirectory()) throw new Error(`${d} is not a directory (a link?): the storage pool keeps only its own directories`);
    chownSync(d, 0, 0);
    chmodSync(d, 0o700);
  }
  const swept = readdirSync(dirs.tmp).map((n) => join(dirs.tmp, n));
  for (const p of swept) rmSync(p, { recursive: true, force: true });
  return { dirs, swept };
}

/** Whether the pool at `root` holds any disk or snapshot image (a directory that does not exist holds none). */
export function holdsImages(root: string): boolean {
  const dirs = poolDirs(root);
  return [dirs.disks, dirs.snapshots].some((d) => {
    try {
      return readdirSync(d).length > 0;
    } catch {
      return false;
    }
  });
}

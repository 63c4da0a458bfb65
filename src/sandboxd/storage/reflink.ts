// Reflink copies: a new file that shares the source's extents (FICLONE), in the daemon's own
// process (libuv's copyfile with FICLONE forced), so a copy costs metadata only, never data.
import { constants, copyFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { copyFile } from "node:fs/promises";
import { join } from "node:path";
import { storageErrorOf } from "./errors.js";

const CLONE = constants.COPYFILE_FICLONE_FORCE | constants.COPYFILE_EXCL;

/**
 * Makes `dst` (which must not exist) a reflink copy of the regular file `src`; fails with
 * StorageError "unsupported" where the file system cannot share extents (never copies data).
 * A failed clone leaves no `dst` behind.
 */
export async function cloneFile(src: string, dst: string): Promise<void> {
  try {
    await copyFile(src, dst, CLONE);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") rmSync(dst, { force: true });
    throw storageErrorOf(err, dst);
  }
}

/** Whether files in `dir` can be reflinked: clones a small probe file there and removes both. */
export function supportsReflink(dir: string): boolean {
  const probe = join(dir, `.reflink-probe-${process.pid}`);
  try {
    writeFileSync(probe, Buffer.alloc(4096, 1), { mode: 0o600 });
    copyFileSync(probe, `${probe}.clone`, CLONE);
    return true;
  } catch {
    return false;
  } finally {
    rmSync(probe, { force: true });
    rmSync(`${probe}.clone`, { force: true });
  }
}

/** Removes probe files a crash left in `dir`; returns their paths. */
export function sweepProbes(dir: string): string[] {
  const swept = readdirSync(dir)
    .filter((n) => /^\.reflink-probe-\d+(\.clone)?$/.test(n))
    .map((n) => join(dir, n));
  for (const p of swept) rmSync(p, { force: true });
  return swept;
}

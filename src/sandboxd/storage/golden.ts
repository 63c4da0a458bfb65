// Golden disk images: one empty ext4 file system per disk size, made once by mkfs with its
// inode tables and journal fully written, so that every sandbox disk is a reflink of it (no
// mkfs per sandbox, and no lazy-init thread writing inode tables into each new disk).
import { closeSync, existsSync, ftruncateSync, linkSync, openSync, rmSync } from "node:fs";
import { join } from "node:path";
import { mustExec } from "../host/exec.js";

/** The format of golden images, part of their names: a change of mkfs flags gets a new name. */
export const GOLDEN_FORMAT = "ext4-v1";

/** Smallest disk (ext4's own structures take a few MiB of it). */
export const MIN_DISK_MB = 32;

/** Largest disk: 16 TiB, ext4's own limit with 4 KiB blocks. */
export const MAX_DISK_MB = 16 * 2 ** 20;

/** The file name of the golden image of `sizeMB`. */
export function goldenName(sizeMB: number): string {
  return `${GOLDEN_FORMAT}-${sizeMB}.img`;
}

/** Whether `name` is the file name of a golden image of the current format. */
export function isGoldenName(name: string): boolean {
  return new RegExp(`^${GOLDEN_FORMAT}-\\d+\\.img$`).test(name);
}

/** Formats a new sparse file at `path` (which must not exist) as an empty ext4 of `sizeMB` with no reserved blocks. */
export async function makeEmptyExt4(path: string, sizeMB: number): Promise<void> {
  const fd = openSync(path, "wx", 0o600);
  try {
    ftruncateSync(fd, sizeMB * 2 ** 20);
  } finally {
    closeSync(fd);
  }
  await mustExec("mkfs.ext4", ["-q", "-F", "-m", "0", "-E", "lazy_itable_init=0,lazy_journal_init=0,nodiscard", path]);
}

/** The golden images of one pool's `golden/` directory, each made once: concurrent callers for a new size share the one mkfs. */
export class GoldenImages {
  private readonly making = new Map<number, Promise<string>>();

  /** `tmpName` gives a fresh temporary path in the pool (same file system) for an image being made. */
  constructor(
    private readonly dir: string,
    private readonly tmpName: (kind: string) => string,
  ) {}

  /** The golden image of `sizeMB`, made now when missing. */
  get(sizeMB: number): Promise<string> {
    const path = join(this.dir, goldenName(sizeMB));
    if (existsSync(path)) return Promise.resolve(path);
    let made = this.making.get(sizeMB);
    if (!made) {
      made = this.make(path, sizeMB).finally(() => this.making.delete(sizeMB));
      this.making.set(sizeMB, made);
    }
    return made;
  }

  private async make(path: string, sizeMB: number): Promise<string> {
    const tmp = this.tmpName(`${GOLDEN_FORMAT}-${sizeMB}`);
    try {
      await makeEmptyExt4(tmp, sizeMB);
      linkSync(tmp, path);
    } finally {
      rmSync(tmp, { force: true });
    }
    return path;
  }
}

/**
 * Per-path bookkeeping of this daemon's uploads. A failed upload removes the file it created only
 * if no other upload has committed to the path since (one that found the file and rewrote it in
 * place shares its inode, so the inode check alone would remove committed data); short commit
 * and cleanup steps on one path run one at a time.
 */

/** Uploads in flight and committed, for each path that has uploads in flight. */
const commits = new Map<string, { live: number; count: number }>();

/** Runs an upload to `path`, counted as in flight until it settles. */
export async function tracked<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const track = commits.get(path) ?? { live: 0, count: 0 };
  commits.set(path, track);
  track.live++;
  try {
    return await fn();
  } finally {
    if (--track.live === 0) commits.delete(path);
  }
}

/** Counts a finished upload to `path`. */
export function committed(path: string): void {
  const track = commits.get(path);
  if (track) track.count++;
}

/** How many uploads to `path` have committed while uploads to it were in flight. */
export function commitCount(path: string): number {
  return commits.get(path)?.count ?? 0;
}

const pathLocks = new Map<string, Promise<void>>();

/** Runs `fn` alone among this daemon's uploads to `path` (short commit and cleanup steps only). */
export async function underPathLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const prev = pathLocks.get(path) ?? Promise.resolve();
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const mine = prev.then(() => held);
  pathLocks.set(path, mine);
  await prev;
  try {
    return await fn();
  } finally {
    release();
    if (pathLocks.get(path) === mine) pathLocks.delete(path);
  }
}

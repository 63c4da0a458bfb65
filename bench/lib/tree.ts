import { closeSync, mkdirSync, openSync } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";

/** Creates `n` empty files f00000.. in `dir` (created if missing). */
export function makeFlat(dir: string, n: number): void {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < n; i++) closeSync(openSync(join(dir, `f${String(i).padStart(6, "0")}`), "w"));
}

/**
 * Creates a 3-level tree of `fan` dirs, `fan` subdirs each and `fan` files in each subdir;
 * returns how many entries it holds (fan + fan² + fan³).
 */
export function makeTree(dir: string, fan: number): number {
  mkdirSync(dir, { recursive: true });
  for (let a = 0; a < fan; a++) {
    const da = join(dir, `d${a}`);
    mkdirSync(da);
    for (let b = 0; b < fan; b++) {
      const db = join(da, `s${b}`);
      mkdirSync(db);
      for (let c = 0; c < fan; c++) closeSync(openSync(join(db, `f${c}`), "w"));
    }
  }
  return fan + fan * fan + fan * fan * fan;
}

/** The fan-out whose 3-level tree holds about `entries` entries. */
export function fanFor(entries: number): number {
  let fan = 1;
  while (fan + 1 + (fan + 1) ** 2 + (fan + 1) ** 3 <= entries) fan++;
  return fan;
}

/**
 * The baseline walk: readdir (sorted) and lstat of every entry down to `depth` levels,
 * each directory's lstats issued at once; returns the number of entries seen.
 */
export async function readdirLstat(dir: string, depth: number): Promise<number> {
  const names = (await readdir(dir)).sort();
  const stats = await Promise.all(names.map((name) => lstat(join(dir, name))));
  let n = names.length;
  if (depth > 1) {
    for (let i = 0; i < names.length; i++) if (stats[i].isDirectory()) n += await readdirLstat(join(dir, names[i]), depth - 1);
  }
  return n;
}

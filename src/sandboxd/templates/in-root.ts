import { lstatSync, readlinkSync, type Stats } from "node:fs";
import { join } from "node:path";

/** Symlinks followed in one lookup before giving up (the kernel's own limit). */
const MAX_LINKS = 40;

/**
 * What `path` is inside the tree at `root`, resolved as the sandbox would see it: symlinks are
 * followed as if `root` were `/` (an absolute target, or `..` above the top, stays inside
 * `root`), never into the host's own files. Undefined when it does not exist or loops. Only for
 * trees no one changes meanwhile (a build's mounted layers between steps).
 */
export function resolveInRoot(root: string, path: string): Stats | undefined {
  const todo = path.split("/").filter((c) => c !== "" && c !== ".");
  const done: string[] = [];
  let links = 0;
  while (todo.length > 0) {
    const c = todo.shift()!;
    if (c === "..") {
      done.pop();
      continue;
    }
    const st = lstatSync(join(root, ...done, c), { throwIfNoEntry: false });
    if (!st) return undefined;
    if (st.isSymbolicLink()) {
      if (++links > MAX_LINKS) return undefined;
      const target = readlinkSync(join(root, ...done, c));
      if (target.startsWith("/")) done.length = 0;
      todo.unshift(...target.split("/").filter((x) => x !== "" && x !== "."));
      continue;
    }
    if (todo.length > 0 && !st.isDirectory()) return undefined;
    done.push(c);
  }
  return lstatSync(join(root, ...done), { throwIfNoEntry: false });
}

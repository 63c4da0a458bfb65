import { chmodSync, lchownSync, lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";

/**
 * Shifts the owner and group of every file below `root` (root included) by `offset`, so that a
 * tree made by host root belongs to the sandboxes' mapped range. chown clears setuid/setgid bits
 * (sudo needs them), so those modes are put back afterwards. Does not cross into other mounts.
 */
export function shiftOwnership(root: string, offset: number): number {
  const dev = lstatSync(root).dev;
  let count = 0;
  const visit = (path: string): void => {
    const st = lstatSync(path);
    if (st.dev !== dev) return;
    if (st.uid < offset || st.gid < offset) {
      lchownSync(path, st.uid < offset ? st.uid + offset : st.uid, st.gid < offset ? st.gid + offset : st.gid);
      count++;
      if (!st.isSymbolicLink() && (st.mode & 0o6000) !== 0) chmodSync(path, st.mode & 0o7777);
    }
    if (st.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
  };
  visit(root);
  return count;
}

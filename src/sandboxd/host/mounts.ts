/** Mount points on the host: whether a directory is one, and unmounting it (lazily when busy). */
import { readFileSync } from "node:fs";
import { execTool } from "./exec.js";

/** Whether `dir` is a mount point now. */
export function isMounted(dir: string): boolean {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .some((l) => l.split(" ")[4]?.replace(/\\040/g, " ") === dir);
}

/** Unmounts `target` when mounted (lazily when still busy). */
export async function unmount(target: string): Promise<void> {
  for (let i = 0; i < 8 && isMounted(target); i++) {
    const r = await execTool("umount", [target]);
    if (r.code !== 0 && isMounted(target)) await execTool("umount", ["-l", target]);
  }
  if (isMounted(target)) throw new Error(`${target} is still mounted`);
}

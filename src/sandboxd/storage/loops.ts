// Which loop devices a file backs, and what is mounted where: read from sysfs and mountinfo.
import { readdirSync, readFileSync } from "node:fs";

/** The loop devices (`/dev/loopN`) whose backing file is `path` (an absolute path in this mount namespace). */
export function loopsBackedBy(path: string): string[] {
  const found: string[] = [];
  for (const dev of readdirSync("/sys/block")) {
    if (!dev.startsWith("loop")) continue;
    let backing: string;
    try {
      backing = readFileSync(`/sys/block/${dev}/loop/backing_file`, "utf8").trim();
    } catch {
      continue; // not attached
    }
    if (backing === path || backing === `${path} (deleted)`) found.push(`/dev/${dev}`);
  }
  return found;
}

/** What is mounted at one mount point: its source device and file-system type. */
export interface MountEntry {
  source: string;
  fstype: string;
}

/** The topmost mount at `mountpoint` (absolute, resolved), or undefined when nothing is mounted there. */
export function mountAt(mountpoint: string): MountEntry | undefined {
  const unescape = (s: string) => s.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
  let found: MountEntry | undefined;
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const [left, right] = line.split(" - ");
    if (!right || unescape(left.split(" ")[4] ?? "") !== mountpoint) continue;
    const [fstype, source] = right.split(" ");
    found = { source: unescape(source), fstype };
  }
  return found;
}

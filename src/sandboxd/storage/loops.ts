// Which loop devices a file backs, and what is mounted where: read from sysfs and mountinfo.
import { readdirSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

/** The loop devices (`/dev/loopN`) whose backing file (as sysfs shows it) passes `match`. */
function loopsWhere(match: (backing: string) => boolean): string[] {
  const found: string[] = [];
  for (const dev of readdirSync("/sys/block")) {
    if (!dev.startsWith("loop")) continue;
    let backing: string;
    try {
      backing = readFileSync(`/sys/block/${dev}/loop/backing_file`, "utf8").trim();
    } catch {
      continue; // not attached
    }
    if (match(backing.replace(/ \(deleted\)$/, ""))) found.push(`/dev/${dev}`);
  }
  return found;
}

/** The loop devices whose backing file is `path` (an absolute path in this mount namespace). */
export function loopsBackedBy(path: string): string[] {
  return loopsWhere((b) => b === path);
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

/** Whether any mount in this namespace has `device` as its source. */
function isMountedDevice(device: string): boolean {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .some((l) => l.split(" - ")[1]?.split(" ")[1] === device);
}

/**
 * The loop devices still in use on `path` (or, with `under`, on any file beneath the directory
 * `path`). Those the kernel is releasing (autoclear set, nothing mounted from them: the release
 * after an unmount runs asynchronously) are waited for, up to `waitMs` (default 10 s).
 */
export async function loopsInUse(path: string, opts: { under?: boolean; waitMs?: number } = {}): Promise<string[]> {
  const match = opts.under ? (b: string) => b.startsWith(`${path}/`) : (b: string) => b === path;
  const deadline = Date.now() + (opts.waitMs ?? 10_000);
  for (;;) {
    const loops = loopsWhere(match);
    const held = loops.filter((dev) => isMountedDevice(dev) || !autoclears(dev));
    if (held.length > 0 || loops.length === 0 || Date.now() > deadline) return loops;
    await sleep(10);
  }
}

function autoclears(device: string): boolean {
  try {
    return readFileSync(`/sys/block/${device.slice("/dev/".length)}/loop/autoclear`, "utf8").trim() === "1";
  } catch {
    return true; // gone since it was listed
  }
}

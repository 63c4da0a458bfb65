import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const DEFAULT_MIRROR = "http://deb.debian.org/debian";

/** Reads a file, or "" when it cannot be read. */
function readOr(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}

/** Lists files in `dir` ending in `suffix`, or none when the directory is missing. */
function filesIn(dir: string, suffix: string): string[] {
  try {
    return readdirSync(dir).filter((f) => f.endsWith(suffix)).sort().map((f) => join(dir, f));
  } catch {
    return [];
  }
}

/**
 * The Debian mirror this machine's apt uses (deb822 `.sources` first, then one-line `.list`
 * files), so that debootstrap fetches from where apt already can; deb.debian.org otherwise.
 */
export function findDebianMirror(aptDir = "/etc/apt"): string {
  const isDebian = (uri: string) => /^(https?|file):\/\/.*\/debian\/?$/.test(uri);
  for (const f of filesIn(join(aptDir, "sources.list.d"), ".sources")) {
    for (const line of readOr(f).split("\n")) {
      const m = /^URIs:\s*(.*)$/.exec(line.trim());
      const uri = m?.[1].split(/\s+/).find(isDebian);
      if (uri) return uri;
    }
  }
  for (const f of [join(aptDir, "sources.list"), ...filesIn(join(aptDir, "sources.list.d"), ".list")]) {
    for (const line of readOr(f).split("\n")) {
      const words = line.trim().split(/\s+/);
      if (words[0] !== "deb") continue;
      const uri = words.slice(1).find((w) => /^(https?|file):/.test(w));
      if (uri && isDebian(uri)) return uri;
    }
  }
  return DEFAULT_MIRROR;
}

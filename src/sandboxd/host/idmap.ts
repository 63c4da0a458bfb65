/** The host ids sandbox users map to, and the check that no host user or subordinate range holds them. */
import { readFileSync } from "node:fs";

/**
 * Host uid and gid that sandbox root (uid 0 inside every sandbox's user namespace) maps to:
 * 0x70000000, in the block systemd documents as unused (above its container ranges, below its
 * "foreign" range) and far above what useradd hands out as subordinate ids (SUB_UID_MAX
 * 600100000), so that no host user owns the sandboxes' files or processes.
 */
export const MAPPED_ROOT = 0x7000_0000;

/** How many ids each sandbox's user namespace maps (0..65535 inside). */
export const MAPPED_RANGE = 65_536;

/** The files whose entries must not overlap the sandboxes' ids, and what their lines hold. */
const ID_FILES: { file: string; kind: "sub" | "passwd" | "group" }[] = [
  { file: "/etc/subuid", kind: "sub" },
  { file: "/etc/subgid", kind: "sub" },
  { file: "/etc/passwd", kind: "passwd" },
  { file: "/etc/group", kind: "group" },
];

/**
 * Entries of /etc/subuid, /etc/subgid, /etc/passwd and /etc/group that overlap the sandboxes'
 * ids [base, base + count), as "file: line" strings (none: the range is free). `read` is the
 * file reader (a missing file has no entries).
 */
export function idRangeConflicts(base = MAPPED_ROOT, count = MAPPED_RANGE, read: (file: string) => string | undefined = readIfThere): string[] {
  const out: string[] = [];
  const overlaps = (start: number, n: number) => Number.isFinite(start) && Number.isFinite(n) && n > 0 && start < base + count && start + n > base;
  for (const { file, kind } of ID_FILES) {
    for (const line of (read(file) ?? "").split("\n")) {
      const f = line.trim().split(":");
      if (f.length < 3 || line.trim().startsWith("#")) continue;
      const hit = kind === "sub" ? overlaps(Number(f[1]), Number(f[2])) : overlaps(Number(f[2]), 1) || (kind === "passwd" && overlaps(Number(f[3]), 1));
      if (hit) out.push(`${file}: ${line.trim()}`);
    }
  }
  return out;
}

function readIfThere(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

/**
 * Throws, naming the entries, when a host user or a subordinate id range overlaps the
 * sandboxes' ids: that user would own every sandbox's root (its files, its processes).
 */
export function assertIdRangeFree(): void {
  const hits = idRangeConflicts();
  if (hits.length === 0) return;
  throw new Error(
    `the sandboxes' host ids ${MAPPED_ROOT}-${MAPPED_ROOT + MAPPED_RANGE - 1} overlap host entries, whose owner would own every sandbox's root: ` +
      `${hits.join("; ")}. Remove or move these entries before starting sandboxd.`,
  );
}

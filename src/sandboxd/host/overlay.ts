/**
 * Overlay mounts of shared read-only layers and a writable one: their options, the host-side
 * mount, and layer stacks (a template's rootfs kept as the read-only layers it was built from).
 */
import { randomBytes } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { mustExec } from "./exec.js";
import { statInRootFollowing } from "./in-root.js";

/** The directories of one overlay mount; `lower` is one directory or a stack of them, bottom first. */
export interface OverlayDirs {
  lower: string | string[];
  upper: string;
  work: string;
}

/** The longest mount(8) -o the kernel takes (one page, less room for the other options). */
const MAX_OPTIONS = 3900;

/** mount(8)'s -o for an overlay of the read-only `lower` (topmost last) and a writable `upper`, with extra flags first. */
export function overlayOptions(p: OverlayDirs, flags: string[] = []): string {
  const lowers = typeof p.lower === "string" ? [p.lower] : p.lower;
  for (const d of [...lowers, p.upper, p.work]) {
    // overlayfs splits its options on commas and lowerdir on colons
    if (/[,:\s\\]/.test(d)) throw new Error(`overlay directory ${JSON.stringify(d)} contains a comma, colon, backslash or space`);
  }
  const options = [...flags, `lowerdir=${[...lowers].reverse().join(":")}`, `upperdir=${p.upper}`, `workdir=${p.work}`].join(",");
  if (options.length > MAX_OPTIONS) throw new Error(`an overlay of ${lowers.length} layers needs mount options longer than ${MAX_OPTIONS} bytes`);
  return options;
}

/**
 * Mounts an overlay of the shared read-only `lower` and a per-sandbox `upper` at `target`, in
 * the host's mount namespace and so nosuid,nodev: the host never runs what a sandbox wrote.
 */
export async function mountOverlay(p: OverlayDirs & { target: string; nice?: number }): Promise<void> {
  await mustExec("mount", ["-t", "overlay", "overlay", "-o", overlayOptions(p, ["nosuid", "nodev"]), p.target], { nice: p.nice });
}

/** The name ending of a layer stack directory (no rootfs sandboxd flattens or pulls ends so). */
export const STACK_SUFFIX = ".stack";
/** The paths a stack records facts about at publication, as the merged root resolves them. */
const PROBES = ["bin/sh", "home/user"] as const;
/** A path whose kind a stack records. */
export type Probe = (typeof PROBES)[number];
type Facts = Partial<Record<Probe, "file" | "dir">>;

/** Whether `rootfs` is a layer stack directory rather than one directory tree. */
export const isLayerStack = (rootfs: string): boolean => rootfs.endsWith(STACK_SUFFIX);

/**
 * Publishes the layer stack `layers` (bottom first: a complete rootfs, then overlay upper
 * directories) as the directory `dir`: links `0`, `1`, … to the layers (short, so 40 of them fit
 * one mount's options) and the kinds of the probed paths in `merged`, the stack's read-only
 * overlay. Made in a temp directory and renamed; the links are sandboxd's, in a directory only
 * root writes, and lead to sandboxd's own layer directories.
 */
export function writeLayerStack(dir: string, layers: string[], merged: string): void {
  if (!isLayerStack(dir)) throw new Error(`a layer stack directory must end in ${STACK_SUFFIX}`);
  const facts: Facts = {};
  for (const p of PROBES) {
    const st = statInRootFollowing(merged, p);
    if (st?.isFile()) facts[p] = "file";
    else if (st?.isDirectory()) facts[p] = "dir";
  }
  const tmp = `${dir}.tmp-${randomBytes(4).toString("hex")}`;
  mkdirSync(tmp, { mode: 0o711 });
  try {
    layers.forEach((l, i) => symlinkSync(l, join(tmp, String(i))));
    writeFileSync(join(tmp, "facts.json"), JSON.stringify(facts), { mode: 0o644 });
    // with room for a sandbox's upper and work directories
    overlayOptions({ lower: stackLinks(dir, layers.length), upper: "/".padEnd(160, "u"), work: "/".padEnd(160, "w") }, ["nodev"]);
    renameSync(tmp, dir);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}

const stackLinks = (dir: string, n: number) => Array.from({ length: n }, (_, i) => join(dir, String(i)));

/** The number of layers in the stack directory `dir` (its links are named 0…n-1). */
function stackDepth(dir: string): number {
  let n = 0;
  while (lstatSync(join(dir, String(n)), { throwIfNoEntry: false })?.isSymbolicLink()) n++;
  if (n === 0 || readdirSync(dir).length !== n + 1) throw new Error(`layer stack ${dir} is damaged`);
  return n;
}

/** The lower directories an overlay of `rootfs` takes, bottom first: the stack's short links, or the one tree. */
export function rootfsLowers(rootfs: string): string[] {
  return isLayerStack(rootfs) ? stackLinks(rootfs, stackDepth(rootfs)) : [rootfs];
}

/** The layers of `rootfs` (bottom first) as the directories its links name, for building on it. */
export function rootfsLayers(rootfs: string): string[] {
  return isLayerStack(rootfs) ? stackLinks(rootfs, stackDepth(rootfs)).map((l) => readlinkSync(l)) : [rootfs];
}

/** The kind of `path` in `rootfs` as a sandbox sees it (a link in the rootfs never leads the host out of it). */
export function rootfsProbe(rootfs: string, path: Probe): "file" | "dir" | undefined {
  if (isLayerStack(rootfs)) {
    if (!existsSync(join(rootfs, "facts.json"))) return undefined;
    return (JSON.parse(readFileSync(join(rootfs, "facts.json"), "utf8")) as Facts)[path];
  }
  const st = statInRootFollowing(rootfs, path);
  return st?.isFile() ? "file" : st?.isDirectory() ? "dir" : undefined;
}

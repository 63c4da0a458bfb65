import { createHash, randomBytes } from "node:crypto";
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, renameSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execTool, mustExec } from "../host/exec.js";
import { MAPPED_ROOT } from "../host/idmap.js";
import { isMounted, unmount } from "../host/mounts.js";

/** The next key of the layer hash chain: the parent's key and what the step does. */
export function chainKey(parent: string, step: unknown): string {
  return createHash("sha256").update(parent).update("\0").update(JSON.stringify(step)).digest("hex").slice(0, 32);
}

/** Checks a directory can go into overlayfs's options (which split on commas and colons). */
function overlaySafe(d: string): string {
  if (/[,:\s\\]/.test(d)) throw new Error(`layer directory ${JSON.stringify(d)} contains a comma, colon, backslash or space`);
  return d;
}

/** overlayfs's lowerdir: the stack's directories, topmost first. */
const lowerdir = (stack: string[]) => [...stack].reverse().map(overlaySafe).join(":");

/**
 * The template layer cache under `<dataDir>/templates`: each layer is an overlay upper directory
 * (`layers/<key>/diff`) made by one step on top of the layers below it, named by the hash chain
 * of (parent layer, step, files hash). A layer appears under its key only once its step has
 * succeeded (made in a temp directory, then renamed), so the cache never serves a failed step.
 */
export class LayerCache {
  readonly root: string;

  constructor(templatesDir: string) {
    this.root = join(templatesDir, "layers");
    mkdirSync(this.root, { recursive: true, mode: 0o711 });
  }

  /** The diff directory of a cached layer, or undefined. */
  get(key: string): string | undefined {
    const diff = join(this.root, key, "diff");
    return existsSync(join(this.root, key, "done")) ? diff : undefined;
  }

  /**
   * Makes the layer `key` over `stack` (bottom first): mounts a fresh upper over it, runs `fn`
   * with the mount point, unmounts, and publishes the layer only when `fn` succeeded.
   */
  async make(key: string, stack: string[], fn: (mnt: string) => Promise<void>): Promise<string> {
    const tmp = join(this.root, `.tmp-${key}-${randomBytes(4).toString("hex")}`);
    const diff = join(tmp, "diff");
    const mnt = join(tmp, "mnt");
    for (const d of [tmp, diff, join(tmp, "work"), mnt]) mkdirSync(d, { mode: 0o755 });
    chmodSync(tmp, 0o711);
    // the merged root takes the upper's owner: the sandboxes' root, as the base rootfs's
    chownSync(diff, MAPPED_ROOT, MAPPED_ROOT);
    try {
      await mustExec("mount", ["-t", "overlay", "overlay", "-o", `lowerdir=${lowerdir(stack)},upperdir=${overlaySafe(diff)},workdir=${join(tmp, "work")}`, mnt]);
      try {
        await fn(mnt);
      } finally {
        await unmount(mnt);
      }
      // only the diff is kept: overlay's work dir and the mount point are scratch
      rmSync(join(tmp, "work"), { recursive: true, force: true });
      rmdirSync(mnt);
      writeFileSync(join(tmp, "done"), new Date().toISOString());
      const dest = join(this.root, key);
      if (existsSync(dest)) {
        // another build made the same layer meanwhile: keep theirs
        await removeTree(tmp);
        return join(dest, "diff");
      }
      renameSync(tmp, dest);
      return join(dest, "diff");
    } catch (err) {
      await removeTree(tmp).catch(() => undefined);
      throw err;
    }
  }

  /** Removes half-made layers (left by a sandboxd that stopped mid-step). */
  async sweep(): Promise<void> {
    for (const name of readdirSync(this.root)) if (name.startsWith(".tmp-")) await removeTree(join(this.root, name)).catch(() => undefined);
  }
}

/** Mounts the read-only overlay of a layer stack (bottom first) at `mnt`: a stage's files for a later stage's COPY --from. */
export async function mountStack(stack: string[], mnt: string): Promise<void> {
  await mustExec("mount", ["-t", "overlay", "overlay", "-o", `ro,nosuid,nodev,lowerdir=${lowerdir(stack)}`, overlaySafe(mnt)]);
}

/** Removes a directory tree, unmounting a mount point below it first; never crosses into a mount. */
export async function removeTree(dir: string): Promise<void> {
  if (isMounted(join(dir, "mnt"))) await unmount(join(dir, "mnt"));
  const r = await execTool("rm", ["-rf", "--one-file-system", dir]);
  if (r.code !== 0) throw new Error(`removing ${dir} failed: ${r.stderr.trim()}`);
}

/**
 * Runs `fn` with the read-only overlay of a layer stack (bottom first) mounted at a scratch
 * directory beside `near`, and unmounts it after: how a stack is looked at from the host.
 */
export async function inMergedStack<T>(stack: string[], near: string, fn: (merged: string) => T): Promise<T> {
  const mnt = `${near}.tmp-mnt-${randomBytes(4).toString("hex")}`;
  mkdirSync(mnt, { mode: 0o700 });
  try {
    await mountStack(stack, mnt);
    try {
      return fn(mnt);
    } finally {
      await unmount(mnt);
    }
  } finally {
    rmdirSync(mnt);
  }
}

/**
 * Makes `out`, a copy of the directory tree `src` in which every file is a hard link to the
 * source's (links themselves are copied, never followed): a pulled image's files kept for the
 * templates built on it after the image cache prunes the image. Made in a temp dir and renamed.
 */
export async function linkTree(src: string, out: string): Promise<string> {
  const tmp = `${out}.tmp-${randomBytes(4).toString("hex")}`;
  try {
    const r = await execTool("cp", ["-a", "--link", "--no-dereference", "--one-file-system", `${src}/`, tmp], { timeoutMs: 30 * 60_000 });
    if (r.code !== 0) throw new Error(`linking ${src} failed: ${r.stderr.trim().slice(-1000)}`);
    renameSync(tmp, out);
    return out;
  } catch (err) {
    await removeTree(tmp).catch(() => undefined);
    if (existsSync(out)) return out;
    throw err;
  }
}

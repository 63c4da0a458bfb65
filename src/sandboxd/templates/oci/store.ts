/**
 * The pulled-image cache under `<templates>/images`: `blobs/sha256/<hex>` (every image's blobs,
 * digest-named and shared), `images/<hex>/` (one unpacked image per manifest digest: `rootfs/`
 * and `image.json`), and `refs/<team>.json` (which digest each of a team's image names resolved
 * to, so a team uses an image only once it has resolved the name itself, with its credentials).
 * Pruning is mark and sweep: an image no build holds goes after a grace period since its last
 * use, or at once, least recently used first, while the disk is below its floor.
 */
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { removeTree } from "../layers.js";
import type { ImageConfig, ImageFitness } from "./image-config.js";

/** One unpacked image. */
export interface StoredImage {
  /** The registry's manifest digest (of the platform's image, for an index). */
  digest: string;
  rootfs: string;
  config: ImageConfig;
  fitness: ImageFitness;
  /** The name it was first pulled as. */
  ref: string;
  /** The blobs it was made from (manifest, config, layers), kept while it is. */
  blobs: string[];
  bytes: number;
}

const hex = (digest: string) => digest.replace(/^sha256:/, "");

/** The cache of pulled images. */
export class ImageStore {
  readonly blobDir: string;
  readonly tmpDir: string;
  private readonly imagesDir: string;
  private readonly refsDir: string;
  private readonly holds = new Map<string, number>();

  constructor(readonly root: string) {
    this.blobDir = join(root, "blobs");
    this.imagesDir = join(root, "images");
    this.refsDir = join(root, "refs");
    this.tmpDir = join(root, "tmp");
    mkdirSync(root, { recursive: true, mode: 0o700 });
    for (const d of [this.blobDir, join(this.blobDir, "sha256"), this.imagesDir, this.refsDir, this.tmpDir]) mkdirSync(d, { recursive: true, mode: 0o700 });
  }

  /** The unpacked image of `digest`, or undefined when it is not here. */
  get(digest: string): StoredImage | undefined {
    try {
      return JSON.parse(readFileSync(join(this.imagesDir, hex(digest), "image.json"), "utf8")) as StoredImage;
    } catch {
      return undefined;
    }
  }

  /** Where the image `digest` is unpacked once published. */
  dirOf(digest: string): string {
    return join(this.imagesDir, hex(digest));
  }

  /** Publishes a finished image directory made in tmpDir (with rootfs/ inside) under its digest; a concurrent publisher's copy wins. */
  async publish(tmp: string, img: Omit<StoredImage, "rootfs">): Promise<StoredImage> {
    const dir = this.dirOf(img.digest);
    const full: StoredImage = { ...img, rootfs: join(dir, "rootfs") };
    writeFileSync(join(tmp, "image.json"), JSON.stringify(full));
    if (existsSync(join(dir, "image.json"))) {
      await removeTree(tmp);
      return this.get(img.digest) ?? full;
    }
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
    return full;
  }

  private refsFile(team: string): string {
    return join(this.refsDir, `${createHash("sha256").update(team).digest("hex").slice(0, 24)}.json`);
  }

  private refs(team: string): Record<string, { digest: string; at: string }> {
    try {
      return JSON.parse(readFileSync(this.refsFile(team), "utf8"));
    } catch {
      return {};
    }
  }

  /** The digest `ref` resolved to for `team` last time, when that image is still here. */
  resolved(team: string, ref: string): string | undefined {
    const d = this.refs(team)[ref]?.digest;
    return d && this.get(d) ? d : undefined;
  }

  /** Records that `ref` resolved to `digest` for `team`. */
  remember(team: string, ref: string, digest: string): void {
    const all = { ...this.refs(team), [ref]: { digest, at: new Date().toISOString() } };
    const file = this.refsFile(team);
    const tmp = `${file}.${randomBytes(4).toString("hex")}`;
    writeFileSync(tmp, JSON.stringify(all), { mode: 0o600 });
    renameSync(tmp, file);
  }

  /** Marks the image used now and holds it against pruning until the returned release is called. */
  hold(digest: string): () => void {
    this.holds.set(digest, (this.holds.get(digest) ?? 0) + 1);
    const now = new Date();
    try {
      utimesSync(join(this.dirOf(digest), "image.json"), now, now);
    } catch {
      // not published yet
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const n = (this.holds.get(digest) ?? 1) - 1;
      if (n <= 0) this.holds.delete(digest);
      else this.holds.set(digest, n);
    };
  }

  /**
   * Removes images no build holds that were last used more than `graceMs` ago, then, while
   * `pressed()` says the disk is below its floor, the least recently used of the rest; then the
   * blobs and team records no kept image needs, and temp directories of pulls no longer running.
   */
  async sweep(o: { graceMs: number; pressed: () => boolean; pulling: Set<string>; now?: number }): Promise<string[]> {
    const now = o.now ?? Date.now();
    const removed: string[] = [];
    const images = readdirSync(this.imagesDir).map((h) => {
      let used = 0;
      try {
        used = statSync(join(this.imagesDir, h, "image.json")).mtimeMs;
      } catch {
        // a directory without image.json is a leftover: used never
      }
      return { digest: `sha256:${h}`, used };
    }).sort((a, b) => a.used - b.used);
    const keep = new Set<string>();
    for (const img of images) {
      const held = this.holds.has(img.digest) || o.pulling.has(img.digest);
      if (!held && (now - img.used > o.graceMs || o.pressed())) {
        await removeTree(this.dirOf(img.digest));
        removed.push(img.digest);
      } else keep.add(img.digest);
    }
    const blobs = new Set<string>();
    for (const d of keep) for (const b of this.get(d)?.blobs ?? []) blobs.add(hex(b));
    if (o.pulling.size === 0) {
      for (const name of readdirSync(join(this.blobDir, "sha256"))) if (!blobs.has(name)) rmSync(join(this.blobDir, "sha256", name), { force: true });
      for (const name of readdirSync(this.tmpDir)) await removeTree(join(this.tmpDir, name)).catch(() => undefined);
    }
    for (const f of readdirSync(this.refsDir)) {
      const file = join(this.refsDir, f);
      try {
        const all = JSON.parse(readFileSync(file, "utf8")) as Record<string, { digest: string }>;
        const left = Object.fromEntries(Object.entries(all).filter(([, v]) => keep.has(v.digest)));
        if (Object.keys(left).length !== Object.keys(all).length) writeFileSync(file, JSON.stringify(left), { mode: 0o600 });
      } catch {
        rmSync(file, { force: true });
      }
    }
    return removed;
  }
}

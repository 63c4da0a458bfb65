/**
 * Pulls a build's base image: resolves the name to a manifest digest (on each Docker Hub mirror
 * first, then the Hub, for Hub names), then, unless that digest is unpacked already, copies the
 * image by digest with skopeo into the shared blob store and unpacks it with umoci, its files
 * belonging to the sandboxes' mapped ids. A team's name is resolved once and reused until a `force`
 * build resolves it again.
 */
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { basicAuth, redact, secretsOf, withAuthFile, type BasicAuth, type RegistryCredentials } from "./credentials.js";
import { checkImage, readImageConfig } from "./image-config.js";
import { digestOf, parseManifest, pickPlatform, type Descriptor } from "./manifest.js";
import { PullProgress } from "./progress.js";
import { transportRef, type ImageRef } from "./ref.js";
import { certDirOf, DEFAULT_REGISTRY_TIMEOUT_MS, isInsecure, type RegistrySettings } from "./settings.js";
import { copyToLayout, inspectRaw, RegistryError, type Access } from "./skopeo.js";
import type { ImageStore, StoredImage } from "./store.js";
import { unpackImage } from "./unpack.js";

/** One pull of a build. */
export interface PullRequest {
  ref: ImageRef;
  team: string;
  credentials?: RegistryCredentials;
  /** Resolve the name again even when the team resolved it before. */
  force: boolean;
  signal: AbortSignal;
  say(message: string, level?: "info" | "warn"): void;
}

/** A place a name can be resolved on: a mirror or the image's own registry. */
interface Source {
  host: string;
  insecure: boolean;
  mirror: boolean;
}

/** Pulls images into an ImageStore, one pull per digest at a time. */
export class ImagePuller {
  /** Digests being pulled now (the store's sweep leaves their blobs alone). */
  readonly pulling = new Set<string>();
  private readonly inflight = new Map<string, Promise<StoredImage>>();

  constructor(private readonly store: ImageStore, private readonly settings: RegistrySettings) {}

  /** The unpacked image the request names, pulled if needed; throws an Error whose message suits a build's reason. */
  async ensure(req: PullRequest): Promise<StoredImage> {
    const { ref } = req;
    if (!req.force) {
      const known = this.store.resolved(req.team, ref.canonical);
      if (known) {
        req.say(`using the cached image ${ref.canonical} (${known.slice(0, 19)}); a forced build checks the registry again`);
        return this.store.get(known)!;
      }
    }
    const auth = req.credentials ? await basicAuth(req.credentials, req.signal).catch((err: Error) => {
      throw new Error(`registry credentials for ${ref.registry}: ${err.message}`);
    }) : undefined;
    const secrets = secretsOf(auth);
    const sources: Source[] = [
      ...(ref.hub ? this.settings.mirrors.map((m) => ({ host: m.host, insecure: m.insecure || isInsecure(this.settings, m.host), mirror: true })) : []),
      { host: ref.registry, insecure: isInsecure(this.settings, ref.registry), mirror: false },
    ];
    let lastErr: Error | undefined;
    for (const src of sources) {
      try {
        const img = await this.access(src, ref.registry, auth, secrets, (a) => this.fromSource(req, src, a));
        this.store.remember(req.team, ref.canonical, img.digest);
        return img;
      } catch (err) {
        if (req.signal.aborted) throw err;
        lastErr = err as Error;
        if (src.mirror) req.say(`mirror ${src.host}: ${redact(lastErr.message, secrets)}; trying the next source`, "warn");
      }
    }
    const e = lastErr!;
    const what = e instanceof RegistryError && e.denied ? "access denied (check the registry credentials)" : e instanceof RegistryError && e.notFound ? "not found" : "failed";
    throw new Error(`pulling ${ref.canonical}: ${what}: ${redact(e.message, secrets)}`);
  }

  /** Runs `fn` with how `src` is reached: the build's credentials (own registry only), else the host's auth file, else anonymous. */
  private async access<T>(src: Source, registry: string, auth: BasicAuth | undefined, secrets: string[], fn: (a: Access) => Promise<T>): Promise<T> {
    const certDir = certDirOf(this.settings, src.host);
    if (auth && !src.mirror) return withAuthFile(this.store.tmpDir, registry, auth, (file) => fn({ insecure: src.insecure, authFile: file, certDir, secrets }));
    return fn({ insecure: src.insecure, authFile: this.settings.authFile, certDir, secrets });
  }

  /** How long a registry may keep a request or a pull waiting. */
  private get timeoutMs(): number {
    return this.settings.timeoutMs ?? DEFAULT_REGISTRY_TIMEOUT_MS;
  }

  /** Resolves the name on one source and pulls what it resolves to. */
  private async fromSource(req: PullRequest, src: Source, a: Access): Promise<StoredImage> {
    const { ref } = req;
    const raw = await inspectRaw(transportRef(ref, src.host), a, req.signal, this.timeoutMs);
    const top = digestOf(raw);
    if (ref.digest && top !== ref.digest) throw new Error(`digest mismatch: the registry answered ${top} for ${ref.digest}`);
    let parsed = parseManifest(raw);
    let digest = top;
    if (parsed.kind === "index") {
      const entry: Descriptor = pickPlatform(parsed.manifests);
      digest = entry.digest;
      const inner = await inspectRaw(transportRef(ref, src.host, digest), a, req.signal, this.timeoutMs);
      if (digestOf(inner) !== digest) throw new Error(`digest mismatch: the registry answered ${digestOf(inner)} for ${digest}`);
      parsed = parseManifest(inner);
      if (parsed.kind !== "image") throw new Error("the image index names another index, not an image");
    }
    const have = this.store.get(digest);
    if (have) {
      req.say(`${ref.canonical} is ${digest.slice(0, 19)}, already pulled`);
      return have;
    }
    const image = parsed;
    const running = this.inflight.get(digest);
    if (running) {
      req.say(`${ref.canonical} is ${digest.slice(0, 19)}, being pulled by another build; waiting for it`);
      return running;
    }
    const p = this.pull(req, src, a, digest, image.config, image.layers);
    this.inflight.set(digest, p);
    this.pulling.add(digest);
    try {
      return await p;
    } finally {
      this.inflight.delete(digest);
      this.pulling.delete(digest);
    }
  }

  /** Copies the image `digest` into a temp layout, unpacks it and publishes it in the store. */
  private async pull(req: PullRequest, src: Source, a: Access, digest: string, config: Descriptor, layers: Descriptor[]): Promise<StoredImage> {
    const tmp = mkdtempSync(join(this.store.tmpDir, ".pull-"));
    const progress = new PullProgress(this.store.blobDir, join(tmp, "layout"), layers, req.say);
    try {
      req.say(`pulling ${req.ref.canonical}${src.mirror ? ` from mirror ${src.host}` : ""} (${digest.slice(0, 19)}): ${progress.summary()}`);
      progress.start();
      // a registry that stops sending (a hung connection) fails the pull instead of holding it for the copy's whole bound
      const stalled = new AbortController();
      const cancel = () => stalled.abort(req.signal.reason);
      req.signal.addEventListener("abort", cancel, { once: true });
      const watch = setInterval(() => {
        if (progress.idleMs() > this.timeoutMs) stalled.abort(new RegistryError(`the registry sent nothing for ${Math.round(this.timeoutMs / 1000)} s`));
      }, 1000);
      try {
        await copyToLayout(transportRef(req.ref, src.host, digest), join(tmp, "layout"), this.store.blobDir, a, stalled.signal, () => progress.tick());
      } finally {
        clearInterval(watch);
        req.signal.removeEventListener("abort", cancel);
        progress.stop();
      }
      progress.done();
      // umoci reads the layout's blobs: the shared directory skopeo wrote them to
      rmSync(join(tmp, "layout", "blobs"), { recursive: true, force: true });
      symlinkSync(this.store.blobDir, join(tmp, "layout", "blobs"));
      const t0 = Date.now();
      const imageConfig = readImageConfig(this.store.blobDir, config.digest);
      await unpackImage(join(tmp, "layout"), join(tmp, "rootfs"), req.signal);
      req.say(`unpacked ${layers.length} layer(s) in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      rmSync(join(tmp, "layout"), { recursive: true, force: true });
      const fitness = checkImage(join(tmp, "rootfs"));
      const bytes = layers.reduce((n, l) => n + l.size, 0);
      return await this.store.publish(tmp, { digest, config: imageConfig, fitness, ref: req.ref.canonical, blobs: [digest, config.digest, ...layers.map((l) => l.digest)], bytes });
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      throw err;
    }
  }
}

import type { Store } from "../store/store.js";
import { readFileInRoot } from "../host/in-root.js";
import { BuildFailure } from "./build-failure.js";
import type { RegistryCredentials } from "./oci/credentials.js";
import type { ImageConfig } from "./oci/image-config.js";
import type { ImagePuller } from "./oci/pull.js";
import { ImageRefError, parseImageRef } from "./oci/ref.js";
import type { ImageStore } from "./oci/store.js";

/** Image names that mean the base rootfs (Debian bookworm with E2B's base tools), built here without a registry. */
const LOCAL_IMAGES = [/^(docker\.io\/)?e2bdev\/base(:[\w.-]+)?$/, /^(docker\.io\/)?(library\/)?debian:(bookworm|12)([\w.-]*)$/];

/** The rootfs a build starts from, and for a pulled image its config and the hold on it. */
export interface BaseImage {
  rootfs: string;
  image?: { digest: string; config: ImageConfig; release(): void };
}

/** What a stage starts from: an image or a template (neither: the base rootfs); `final`: the template's own stage, which sandboxes run. */
export interface BaseFrom {
  fromImage?: string;
  fromTemplate?: string;
  force: boolean;
  final: boolean;
}

/** Where images come from: the puller and its store; undefined: sandboxd pulls no images. */
export interface ImageSource {
  puller: ImagePuller;
  store: ImageStore;
}

/** What resolving a build's base needs besides the spec. */
export interface BaseRequest {
  store: Store;
  teamID: string;
  baseRootfs: string;
  images?: ImageSource;
  credentials?: RegistryCredentials;
  signal: AbortSignal;
  say(message: string, level?: "info" | "warn"): void;
}

/** A numeric image User (`1000`, `1000:1000`) as the name the image's /etc/passwd gives it; a `name:group` as the name. */
function userName(rootfs: string, user: string): string {
  const [u] = user.split(":");
  if (!/^\d+$/.test(u)) return u;
  try {
    const passwd = readFileInRoot(rootfs, "etc/passwd", 4 << 20).toString("utf8");
    const line = passwd.split("\n").find((l) => l.split(":")[2] === u);
    if (line) return line.split(":")[0];
  } catch {
    // no passwd: keep the number
  }
  return user;
}

/**
 * The rootfs a build (or a stage of it) starts from: `fromTemplate` → that template's current rootfs (the team's
 * own or a published one, ready); `fromImage` → the base rootfs for e2bdev/base and
 * debian:bookworm*, else the image pulled from its registry (a BuildFailure when it cannot be, or
 * lacks, for the final stage, what sandboxes need); neither → the base rootfs (the SDK's default is e2bdev/base).
 */
export async function resolveBase(r: BaseRequest, spec: BaseFrom): Promise<BaseImage> {
  if (spec.fromTemplate) {
    const ref = spec.fromTemplate.toLowerCase().replace(/^.*\//, "").replace(/:default$/, "");
    const t = r.store.templates.get(ref) ?? r.store.templates.byAlias(ref);
    if (!t || (t.teamID !== r.teamID && t.public !== true)) throw new BuildFailure(`base template '${spec.fromTemplate}' not found`, "base");
    if (!t.rootfs) throw new BuildFailure(`base template '${spec.fromTemplate}' has no ready build`, "base");
    return { rootfs: t.rootfs };
  }
  const name = spec.fromImage?.trim();
  if (!name || LOCAL_IMAGES.some((re) => re.test(name.toLowerCase()))) return { rootfs: r.baseRootfs };
  if (!r.images) throw new BuildFailure(`base image '${name}' is not available: this sandboxd pulls no images; use e2bdev/base or fromTemplate`, "base");
  let ref;
  try {
    ref = parseImageRef(name);
  } catch (err) {
    throw new BuildFailure(err instanceof ImageRefError ? err.message : String(err), "base");
  }
  let img;
  try {
    img = await r.images.puller.ensure({ ref, team: r.teamID, credentials: r.credentials, force: spec.force, signal: r.signal, say: r.say });
  } catch (err) {
    r.signal.throwIfAborted();
    throw new BuildFailure((err as Error).message, "base");
  }
  if (spec.final && img.fitness.missing.length > 0) {
    throw new BuildFailure(`base image ${ref.canonical} cannot run sandboxes: it lacks ${img.fitness.missing.join("; ")}`, "base");
  }
  if (spec.final) for (const w of img.fitness.warnings) r.say(w, "warn");
  const release = r.images.store.hold(img.digest);
  const config = { ...img.config, ...(img.config.user ? { user: userName(img.rootfs, img.config.user) } : {}) };
  return { rootfs: img.rootfs, image: { digest: img.digest, config, release } };
}

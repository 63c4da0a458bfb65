/**
 * Image references as Docker reads them: `ubuntu:22.04` is docker.io/library/ubuntu:22.04, a first
 * component with a dot or a colon (or `localhost`) is a registry host[:port], a tag follows `:`,
 * a digest follows `@`, and no tag means `latest`.
 */

/** A parsed, normalized image reference. */
export interface ImageRef {
  /** Registry host[:port]; Docker Hub is `docker.io`. */
  registry: string;
  /** Repository path inside the registry (`library/ubuntu` for official Hub images). */
  repository: string;
  tag?: string;
  /** `sha256:<64 hex>`; when set it wins over the tag, as in Docker. */
  digest?: string;
  /** Whether it names a Docker Hub image (mirrors apply). */
  hub: boolean;
  /** The normalized full name: `docker.io/library/ubuntu:22.04`, `host:5000/a/b@sha256:...`. */
  canonical: string;
}

/** A reference that cannot name an image, with a message for the build's reason. */
export class ImageRefError extends Error {}

const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^sha256:[a-f0-9]{64}$/;
const HOST = /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::\d{1,5})?$/;

/** Parses an image reference (`name[:tag][@digest]`) into its registry, repository, tag and digest. */
export function parseImageRef(text: string): ImageRef {
  const raw = text.trim();
  const bad = (why: string): never => {
    throw new ImageRefError(`invalid image reference '${raw.slice(0, 200)}': ${why}`);
  };
  if (raw === "" || raw.length > 512) bad("it must be 1 to 512 characters");
  let rest = raw;
  let digest: string | undefined;
  const at = rest.indexOf("@");
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) bad("the digest must be sha256: and 64 lowercase hex digits");
  }
  let tag: string | undefined;
  const slash = rest.lastIndexOf("/");
  const colon = rest.lastIndexOf(":");
  if (colon > slash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) bad(`the tag '${tag.slice(0, 140)}' is not valid (letters, digits, _ . -, at most 128)`);
  }
  const parts = rest.split("/");
  let registry = "docker.io";
  if (parts.length > 1 && (/[.:]/.test(parts[0]) || parts[0] === "localhost")) {
    registry = parts.shift()!;
    if (!HOST.test(registry)) bad(`'${registry}' is not a registry host[:port]`);
  }
  if (registry === "index.docker.io" || registry === "registry-1.docker.io") registry = "docker.io";
  const hub = registry === "docker.io";
  if (hub && parts.length === 1) parts.unshift("library");
  if (parts.length === 0 || parts.some((c) => !COMPONENT.test(c))) bad("the repository name must be lowercase letters, digits and separators (. _ -), in /-separated components");
  const repository = parts.join("/");
  if (!tag && !digest) tag = "latest";
  const canonical = `${registry}/${repository}${tag ? `:${tag}` : ""}${digest ? `@${digest}` : ""}`;
  return { registry, repository, ...(tag ? { tag } : {}), ...(digest ? { digest } : {}), hub, canonical };
}

/** The reference skopeo pulls: `docker://host/repo@digest` (or `:tag`), on `host` (a mirror's, or the image's own). */
export function transportRef(ref: ImageRef, host = ref.registry, digest = ref.digest): string {
  return `docker://${host}/${ref.repository}${digest ? `@${digest}` : `:${ref.tag}`}`;
}

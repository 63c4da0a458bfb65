/**
 * OCI and Docker v2 manifests and indexes (manifest lists): which image of a multi-arch index
 * this host runs, and what an image's layers and config are.
 */
import { createHash } from "node:crypto";

/** A content descriptor. */
export interface Descriptor {
  mediaType?: string;
  digest: string;
  size: number;
  platform?: { os?: string; architecture?: string; variant?: string };
}

/** A parsed manifest or index. */
export type Parsed = { kind: "index"; manifests: Descriptor[] } | { kind: "image"; config: Descriptor; layers: Descriptor[] };

/** The sha256 digest of raw bytes (`sha256:<hex>`). */
export const digestOf = (raw: Buffer): string => `sha256:${createHash("sha256").update(raw).digest("hex")}`;

/** The OCI architecture name of this host (Node's x64 is amd64). */
export function hostArch(arch = process.arch): string {
  return ({ x64: "amd64", arm64: "arm64", arm: "arm", ia32: "386", ppc64: "ppc64le", s390x: "s390x", riscv64: "riscv64" } as Record<string, string>)[arch] ?? arch;
}

const isDescriptor = (d: unknown): d is Descriptor =>
  !!d && typeof (d as Descriptor).digest === "string" && /^sha256:[a-f0-9]{64}$/.test((d as Descriptor).digest) && typeof (d as Descriptor).size === "number";

/** Parses a manifest or index; throws naming what is wrong (schema 1 manifests are refused). */
export function parseManifest(raw: Buffer): Parsed {
  let m: { schemaVersion?: number; mediaType?: string; manifests?: unknown[]; config?: unknown; layers?: unknown[] };
  try {
    m = JSON.parse(raw.toString("utf8"));
  } catch {
    throw new Error("the registry answered a manifest that is not JSON");
  }
  if (m?.schemaVersion === 1) throw new Error("the image has a Docker schema 1 manifest, which is deprecated and not supported; push it again with a current Docker");
  if (Array.isArray(m?.manifests)) {
    if (!m.manifests.every(isDescriptor)) throw new Error("the registry answered an image index with malformed entries");
    return { kind: "index", manifests: m.manifests as Descriptor[] };
  }
  if (isDescriptor(m?.config) && Array.isArray(m.layers) && m.layers.every(isDescriptor)) return { kind: "image", config: m.config, layers: m.layers as Descriptor[] };
  throw new Error("the registry answered something that is neither an image manifest nor an image index");
}

/** The entry of an index for linux/`arch` (attestation entries skipped); throws listing the platforms it has. */
export function pickPlatform(manifests: Descriptor[], arch = hostArch()): Descriptor {
  const linux = manifests.filter((d) => d.platform?.os === "linux" && d.platform.architecture === arch);
  const pick = linux.find((d) => !d.platform?.variant || d.platform.variant === "v8") ?? linux[0];
  if (pick) return pick;
  const have = manifests.map((d) => `${d.platform?.os ?? "?"}/${d.platform?.architecture ?? "?"}`).filter((p) => p !== "unknown/unknown");
  throw new Error(`the image has no linux/${arch} variant (it has: ${[...new Set(have)].join(", ") || "none"})`);
}

/**
 * How sandboxd reaches registries: Docker Hub mirrors (Docker's `registry-mirrors`), the registries
 * it may talk to without verified TLS (Docker's `insecure-registries`), an optional host-wide
 * credentials file in docker config.json format, extra CAs in Docker's certs.d layout, and how long
 * a registry may keep a pull waiting.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";

/** One Docker Hub mirror. */
export interface Mirror {
  /** host[:port][/path] the mirror serves Hub repositories under. */
  host: string;
  /** An http:// mirror: plain HTTP (and unverified TLS) allowed. */
  insecure: boolean;
}

/** The registry settings of a sandboxd. */
export interface RegistrySettings {
  /** Tried in order before Docker Hub for Hub images. */
  mirrors: Mirror[];
  /** host[:port] names talked to over plain HTTP or unverified TLS. */
  insecure: Set<string>;
  /** A docker config.json with `auths` for private registries, used when a build brings no credentials. */
  authFile?: string;
  /** How long a pulled image no build uses is kept (default 24 h); the disk floor prunes sooner. */
  imageGraceMs?: number;
  /**
   * Docker's certs.d layout: `<dir>/<host[:port]>/*.crt` are CAs trusted (beside the system's) for
   * that registry, `client.cert`/`client.key` its client certificate.
   */
  certsDir?: string;
  /** How long a registry may take to answer a manifest request, or go without sending a byte of a pull (default 60 s). */
  timeoutMs?: number;
}

/** How long a registry may keep a request or a pull waiting when the settings do not say. */
export const DEFAULT_REGISTRY_TIMEOUT_MS = 60_000;

/** The certs.d directory of `host` (a registry's or a mirror's host[:port][/path]), when the settings have one for it. */
export function certDirOf(s: RegistrySettings, host: string): string | undefined {
  if (!s.certsDir) return undefined;
  const dir = join(s.certsDir, host.split("/")[0].toLowerCase());
  return existsSync(dir) ? dir : undefined;
}

/** Parses one mirror URL (`https://mirror.example.com`, `http://127.0.0.1:5000`); throws a message fit for the command line. */
export function parseMirror(text: string): Mirror {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new Error(`--registry-mirror must be an http:// or https:// URL, got '${text}'`);
  }
  if ((u.protocol !== "http:" && u.protocol !== "https:") || u.username || u.password || u.search || u.hash) {
    throw new Error(`--registry-mirror must be an http:// or https:// URL without credentials, query or fragment, got '${text}'`);
  }
  const path = u.pathname.replace(/\/+$/, "");
  return { host: `${u.host}${path}`, insecure: u.protocol === "http:" };
}

/** Checks one `--insecure-registry` value (host[:port]); throws a message fit for the command line. */
export function checkInsecureRegistry(text: string): string {
  if (!/^[a-zA-Z0-9.-]+(:\d{1,5})?$|^\[[0-9a-fA-F:]+\](:\d{1,5})?$/.test(text)) throw new Error(`--insecure-registry must be host[:port], got '${text}'`);
  return text.toLowerCase();
}

/** Whether `host` (a registry or a mirror's host[/path]) may be reached without verified TLS. */
export function isInsecure(s: RegistrySettings, host: string): boolean {
  return s.insecure.has(host.split("/")[0].toLowerCase());
}

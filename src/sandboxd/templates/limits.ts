import type { ExtractLimits } from "./extract.js";

/** What the COPY sources one team may keep on the host. */
export interface UploadLimits {
  /** The largest single upload (the archive as sent). */
  maxUploadBytes: number;
  /** Uploads a team keeps at once (older unused ones are evicted first; the SDK re-uploads what is missing). */
  teamMaxUploads: number;
  /** Bytes a team's uploads take, archives and unpacked files together. */
  teamMaxBytes: number;
  /** What one archive may unpack to (also never more than the team has left). */
  extract: ExtractLimits;
}

const GiB = 1024 * 1024 * 1024;

/** The defaults: a 1 GiB upload (E2B's), 50 uploads and 8 GiB per team, 4 GiB / 200 000 entries / depth 64 per archive. */
export const DEFAULT_UPLOAD_LIMITS: UploadLimits = {
  maxUploadBytes: GiB,
  teamMaxUploads: 50,
  teamMaxBytes: 8 * GiB,
  extract: { maxBytes: 4 * GiB, maxEntries: 200_000, maxDepth: 64 },
};

/** The variables that override each limit (bytes or counts, positive integers). */
const ENV: Record<string, (l: UploadLimits, n: number) => void> = {
  SANDBOXD_TEMPLATE_MAX_UPLOAD_BYTES: (l, n) => (l.maxUploadBytes = Math.min(n, GiB)),
  SANDBOXD_TEMPLATE_TEAM_MAX_UPLOADS: (l, n) => (l.teamMaxUploads = n),
  SANDBOXD_TEMPLATE_TEAM_MAX_BYTES: (l, n) => (l.teamMaxBytes = n),
  SANDBOXD_TEMPLATE_EXTRACT_MAX_BYTES: (l, n) => (l.extract.maxBytes = n),
  SANDBOXD_TEMPLATE_EXTRACT_MAX_ENTRIES: (l, n) => (l.extract.maxEntries = n),
  SANDBOXD_TEMPLATE_EXTRACT_MAX_DEPTH: (l, n) => (l.extract.maxDepth = n),
};

/**
 * The upload limits in force: the defaults, each overridable by its environment variable (an
 * operator with a small disk lowers them; the upload cap never rises above 1 GiB). A value that
 * is not a positive integer stops the start with a message naming it.
 */
export function uploadLimits(env: NodeJS.ProcessEnv): UploadLimits {
  const l: UploadLimits = { ...DEFAULT_UPLOAD_LIMITS, extract: { ...DEFAULT_UPLOAD_LIMITS.extract } };
  for (const [name, set] of Object.entries(ENV)) {
    const v = env[name];
    if (v === undefined || v === "") continue;
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got '${v}'`);
    set(l, n);
  }
  return l;
}

/**
 * skopeo, the containers project's registry client: reads manifests (`inspect --raw`) and copies
 * images into an OCI layout whose blobs live in one shared, digest-named directory. skopeo verifies
 * every blob and manifest it fetches against its digest. Credentials come only from the auth file
 * given (or none: `--no-creds`), never from root's own docker or containers config.
 */
import { spawn } from "node:child_process";
import { redact } from "./credentials.js";

/** How one registry is reached. */
export interface Access {
  /** Plain HTTP and unverified TLS allowed (an insecure registry or an http:// mirror). */
  insecure: boolean;
  /** A containers auth file; undefined: anonymous. */
  authFile?: string;
  /** A certs.d directory of the registry (its CAs beside the system's, its client certificate). */
  certDir?: string;
  /** Words to hide in error messages. */
  secrets: string[];
}

/** A registry operation that failed, with skopeo's reason made readable. */
export class RegistryError extends Error {
  constructor(message: string, readonly notFound = false, readonly denied = false) {
    super(message);
  }
}

/** skopeo's last `msg="..."`, or its last line, secrets removed; a deadline named as the registry's silence. */
function reason(stderr: string, secrets: string[], timeoutMs: number): string {
  const msgs = [...stderr.matchAll(/msg="((?:[^"\\]|\\.)*)"/g)].map((m) => m[1].replace(/\\"/g, '"'));
  const text = redact(msgs.at(-1) ?? stderr.trim().split("\n").at(-1) ?? "", secrets).replace(/^Error parsing image name "[^"]*": /, "").slice(0, 600) || "no reason given";
  return /context deadline exceeded|Client\.Timeout|TLS handshake timeout/.test(text) ? `the registry did not answer within ${Math.round(timeoutMs / 1000)} s (${text})` : text;
}

/** Runs skopeo; resolves with stdout when it exits 0, rejects with a RegistryError otherwise. */
function run(args: string[], a: Access, o: { signal: AbortSignal; timeoutMs: number; onLine?: (line: string) => void }): Promise<Buffer> {
  const env = { ...process.env };
  delete env.REGISTRY_AUTH_FILE;
  return new Promise((resolve, reject) => {
    const child = spawn("skopeo", ["--command-timeout", `${Math.ceil(o.timeoutMs / 1000)}s`, ...args], { stdio: ["ignore", "pipe", "pipe"], env, timeout: o.timeoutMs + 10_000 });
    const out: Buffer[] = [];
    let size = 0;
    let stderr = "";
    let partial = "";
    const kill = () => child.kill("SIGKILL");
    o.signal.addEventListener("abort", kill, { once: true });
    child.stdout.on("data", (d: Buffer) => {
      if (o.onLine) {
        const lines = (partial + d.toString("utf8")).split("\n");
        partial = lines.pop() ?? "";
        for (const l of lines) if (l.trim()) o.onLine(l.trim());
      } else if (size < 16 << 20) {
        out.push(d);
        size += d.length;
      }
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-16_000)));
    child.once("error", (err: NodeJS.ErrnoException) => reject(new RegistryError(err.code === "ENOENT" ? "skopeo is not installed (apt-get install skopeo)" : err.message)));
    child.once("close", (code, sig) => {
      o.signal.removeEventListener("abort", kill);
      if (code === 0) return resolve(Buffer.concat(out));
      if (o.signal.aborted) return reject(o.signal.reason instanceof Error ? o.signal.reason : new Error("aborted"));
      const why = sig ? `killed after ${Math.round(o.timeoutMs / 1000)} s without an answer` : reason(stderr, a.secrets, o.timeoutMs);
      // status codes as whole words: a registry's port (127.0.0.1:40123) is no 401
      reject(new RegistryError(why, /manifest unknown|not found|name unknown|\b404\b/i.test(why), /unauthorized|authentication required|denied|\b40[13]\b/i.test(why)));
    });
  });
}

const tls = (prefix: string, a: Access) => [`--${prefix}tls-verify=${a.insecure ? "false" : "true"}`, ...(a.certDir ? [`--${prefix}cert-dir`, a.certDir] : [])];
const creds = (prefix: string, a: Access) => (a.authFile ? [`--${prefix}authfile`, a.authFile] : [`--${prefix}no-creds`]);

/** The raw manifest (or index) bytes `ref` (a docker:// reference) names. */
export function inspectRaw(ref: string, a: Access, signal: AbortSignal, timeoutMs = 60_000): Promise<Buffer> {
  return run(["inspect", "--raw", "--retry-times", "1", ...tls("", a), ...creds("", a), ref], a, { signal, timeoutMs });
}

/** Copies the single-platform image `ref` into the OCI layout `layout` (image name `img`), its blobs into `blobDir`. */
export async function copyToLayout(ref: string, layout: string, blobDir: string, a: Access, signal: AbortSignal, onLine: (line: string) => void, timeoutMs = 60 * 60_000): Promise<void> {
  await run(["copy", "--retry-times", "2", ...tls("src-", a), ...creds("src-", a), "--dest-shared-blob-dir", blobDir, ref, `oci:${layout}:img`], a, { signal, timeoutMs, onLine });
}

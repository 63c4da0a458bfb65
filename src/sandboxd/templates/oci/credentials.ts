/**
 * A build's registry credentials (the SDK's `fromImageRegistry`: basic, AWS ECR or GCP service
 * account), kept in memory for that build's pull only: never in the store, the build's spec or a
 * log. They reach skopeo through a 0600 auth file that exists only while skopeo runs.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ecrLogin } from "./ecr.js";

/** What `fromImageRegistry` carries. */
export type RegistryCredentials =
  | { type: "registry"; username: string; password: string }
  | { type: "aws"; accessKeyId: string; secretAccessKey: string; region: string }
  | { type: "gcp"; serviceAccountJson: string };

/** A user name and password for one registry. */
export interface BasicAuth {
  username: string;
  password: string;
}

/** The user name and password the credentials log in with (AWS: a token from ECR; GCP: `_json_key`). */
export async function basicAuth(c: RegistryCredentials, signal: AbortSignal): Promise<BasicAuth> {
  if (c.type === "registry") return { username: c.username, password: c.password };
  if (c.type === "gcp") return { username: "_json_key", password: c.serviceAccountJson };
  return ecrLogin(c, signal);
}

/** The words a message must never show: the password and anything long enough to be a key. */
export function secretsOf(a: BasicAuth | undefined): string[] {
  return a ? [a.password, Buffer.from(`${a.username}:${a.password}`).toString("base64")].filter((s) => s.length >= 4) : [];
}

/** Replaces every secret in `text` with `***`. */
export function redact(text: string, secrets: string[]): string {
  let out = text;
  for (const s of secrets) out = out.split(s).join("***");
  return out;
}

/**
 * Runs `fn` with the path of a containers auth file (0600, in a 0700 directory under `tmpDir`)
 * holding `auth` for `host`, and removes it afterwards whatever happens.
 */
export async function withAuthFile<T>(tmpDir: string, host: string, auth: BasicAuth, fn: (file: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpDir, ".auth-"));
  try {
    const file = join(dir, "auth.json");
    const token = Buffer.from(`${auth.username}:${auth.password}`).toString("base64");
    writeFileSync(file, JSON.stringify({ auths: { [host]: { auth: token } } }), { mode: 0o600 });
    return await fn(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { clientDomain } from "./config.js";

declare const SANDBOXD_VERSION: string | undefined;

/** Our version: injected at bundle time, else read from package.json (tsc builds and tests). */
export function sandboxdVersion(): string {
  if (typeof SANDBOXD_VERSION === "string") return SANDBOXD_VERSION;
  try {
    return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
  } catch {
    return "0.0.0-dev";
  }
}

/**
 * The envd artifact directory: the flag's, else `envd/` beside the executable (the release
 * tarball's layout), else the repository's `dist/envd-<ver>-linux-<arch>` (a development build).
 */
export function resolveEnvdDir(flag: string | undefined, version: string, script = process.argv[1] ?? ""): string {
  const candidates = flag ? [resolve(flag)] : [join(dirname(resolve(script)), "envd"), join(dirname(resolve(script)), `envd-${version}-linux-${process.arch}`)];
  for (const dir of candidates) if (existsSync(join(dir, "envd"))) return dir;
  const tried = candidates.map((d) => `${d}/envd`).join(", ");
  throw new Error(`no envd executable found (looked for ${tried}); build it with './build.sh --artifact' or pass --envd-dir`);
}

/**
 * The lines a user copies into the shell that runs the SDK. The API key is printed only when it
 * was just made (`apiKey` given); later starts say which file (root's alone) holds it instead.
 */
export function userLines(opts: { domain: string; port: number; apiKey?: string; keyFile: string; caFile: string; teamID?: string }): string {
  return [
    `E2B_DOMAIN=${clientDomain(opts.domain, opts.port)}`,
    ...(opts.apiKey ? [`E2B_API_KEY=${opts.apiKey}`] : [`# E2B_API_KEY: the key is in ${opts.keyFile} (readable by root only; shown once, when it was made): export E2B_API_KEY=$(sudo cat ${opts.keyFile})`]),
    ...(opts.teamID ? [`# the key's team ID: ${opts.teamID}`] : []),
    `NODE_EXTRA_CA_CERTS=${opts.caFile}`,
    `# export these three in the shell that runs the e2b SDK; *.${opts.domain.endsWith("localhost") ? "localhost" : opts.domain} names must resolve to this machine (libnss-myhostname does this for *.localhost)`,
    "",
  ].join("\n");
}

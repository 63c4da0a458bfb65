import { readFileSync } from "node:fs";

declare const ENVD_VERSION: string | undefined;

/** Our version: injected at bundle time, else read from package.json (tsc builds and tests). */
export function envdVersion(): string {
  if (typeof ENVD_VERSION === "string") return ENVD_VERSION;
  try {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
    return pkg.version;
  } catch {
    return "0.0.0-dev";
  }
}

// Packages loaded on first use rather than at start, in the bundle and in the plain tsc build alike.
import { createRequire } from "node:module";

/** Set to true by the bundler (build.sh, scripts/package-sea.mjs); undefined in the plain tsc build. */
declare const ENVD_BUNDLED: boolean | undefined;

/**
 * A CommonJS package loaded on first use instead of at start, so an idle daemon never pays for
 * what no request has needed yet. `bundled` must be a literal `() => require("<id>")`: the bundler
 * sees the call and keeps the package inside the bundle, still initialised only when called. The
 * tsc build (ES modules, used by unit tests) has no `require` and loads `id` from node_modules.
 */
export function lazy<T>(id: string, bundled: () => unknown): () => T {
  let mod: T | undefined;
  return () => {
    if (mod !== undefined) return mod;
    if (typeof ENVD_BUNDLED === "boolean") mod = bundled() as T;
    else mod = createRequire(import.meta.url)(id) as T;
    return mod;
  };
}

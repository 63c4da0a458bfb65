// platform/ is what envd runs on, below every service: its native addon (loaded here; its
// extras in addon.ts), pooled buffers, packages loaded on first use (lazy.ts, node:crypto), and
// the daemon's own memory (heap.ts, memory.ts). Nothing here knows of HTTP, RPC or the sandbox.
//
// This file: finding and loading envd's one native addon (built from native/: spawn, fs,
// inotify), once per process: where it is looked for (the repository's build, beside the single
// executable, the installed /usr/lib/envd) and the error that names every place tried. What it
// exports is typed by its users: addon.ts (the extras) and filesystem/inotify.ts (inotify).
import { createRequire } from "node:module";
import { existsSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";

const ADDON_FILE = "inotify.node";

function safeRealpath(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

/**
 * Files the addon is looked for at, in order: $ENVD_ADDON_DIR, beside the running script, the
 * repo build output next to it, beside the executable and its ../lib/envd (single-executable
 * artifact), /usr/lib/envd (installed), then the build output in any folder above the script
 * or the working directory (compiled tests run from build/test).
 */
export function addonCandidates(env: NodeJS.ProcessEnv = process.env): string[] {
  const release = ["native", "build", "Release"];
  const dirs: string[] = [];
  if (env.ENVD_ADDON_DIR) dirs.push(env.ENVD_ADDON_DIR);
  const script = process.argv[1] ? dirname(safeRealpath(process.argv[1])) : undefined;
  if (script) dirs.push(script, join(script, "..", ...release));
  const exe = dirname(process.execPath);
  dirs.push(exe, join(exe, "..", "lib", "envd"), "/usr/lib/envd");
  for (const start of [script, process.cwd()]) {
    for (let dir = start, i = 0; dir && i < 6; i++, dir = dirname(dir)) dirs.push(join(dir, ...release));
  }
  return [...new Set(dirs.map((d) => join(d, ADDON_FILE)))];
}

let loaded: object | Error | undefined;

/** Loads the addon once; throws an Error naming every place tried when it cannot be found or loaded. */
export function loadNativeAddon(): object {
  if (loaded instanceof Error) throw loaded;
  if (loaded) return loaded;
  const require = createRequire(join(process.cwd(), "noop.js"));
  const tried = addonCandidates();
  for (const file of tried) {
    if (!existsSync(file)) continue;
    try {
      loaded = require(file) as object;
      return loaded;
    } catch (err) {
      loaded = new Error(`cannot load inotify addon ${file}: ${(err as Error).message}`);
      throw loaded;
    }
  }
  loaded = new Error(`inotify addon not found (looked at ${tried.join(", ")})`);
  throw loaded;
}

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Script } from "node:vm";
import type * as RestModule from "./rest.js";

/** What dist/envd-rest.cjs (or the executable's rest asset) exports. */
export type Rest = typeof RestModule;

/**
 * How the rest is found, set by the bundler: "file" (build.sh: dist/envd-rest.cjs beside the
 * entry bundle), "sea" (scripts/package-sea.mjs: an asset of the single executable, with a V8
 * code cache made at build time); undefined in the plain tsc build (ES modules: rest.js).
 */
declare const ENVD_REST: "file" | "sea" | undefined;

/** The single executable's assets: the rest, already wrapped as a CommonJS module function, and its code cache. */
export const SEA_REST_ASSET = "envd-rest.js";
export const SEA_REST_CACHE = "envd-rest.cache";

/** How the rest was loaded, for the log: the source and whether V8 took the code cache. */
export interface Loaded {
  rest: Rest;
  from: "module" | "file" | "sea";
  codeCache?: "accepted" | "rejected" | "none";
}

/**
 * Gets ready to load the rest of the daemon, and returns the function that loads it: one
 * synchronous evaluation of its modules (module build: one import). Called before envd listens,
 * so that whatever needs a file descriptor is done while one is surely free: dist/envd-rest.cjs
 * is read here (the executable's assets are in memory already), so a connection flood that takes
 * every descriptor cannot make the load fail.
 */
export function prepareRest(): () => Promise<Loaded> {
  if (typeof ENVD_REST === "undefined") {
    // A variable specifier: a bundler must not pull rest.js into the entry bundle.
    const spec = "./rest.js";
    return async () => ({ rest: (await import(spec)) as Rest, from: "module" });
  }
  if (ENVD_REST === "sea") return async () => loadFromSea();
  const file = join(__dirname, "envd-rest.cjs");
  let read: { source: string; cachedData?: Buffer } | undefined = { source: wrapCommonJs(readFileSync(file, "utf8")) };
  try {
    read.cachedData = readFileSync(join(__dirname, "envd-rest.cache"));
  } catch {
    read.cachedData = undefined;
  }
  return async () => {
    if (!read) throw new Error("envd's rest is loaded once");
    const { source, cachedData } = read;
    // The cache (~0.2 MiB) is garbage once compiled; the source lives on in the compiled script.
    read = undefined;
    return { from: "file", ...run(source, file, cachedData, createRequire(file), file) };
  };
}

/** A CommonJS module's source as the function the module loader would make of it (scripts/code-cache.mjs wraps the same way). */
export function wrapCommonJs(source: string): string {
  return `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
}

function loadFromSea(): Loaded {
  const sea = require("node:sea") as typeof import("node:sea");
  const source = sea.getAsset(SEA_REST_ASSET, "utf8");
  let cachedData: Buffer | undefined;
  try {
    cachedData = Buffer.from(sea.getRawAsset(SEA_REST_CACHE) as ArrayBuffer);
  } catch {
    cachedData = undefined;
  }
  return { from: "sea", ...run(source, SEA_REST_ASSET, cachedData, require, process.execPath) };
}

/** Compiles a wrapped module (with its code cache, when there is one) and runs it: its exports, and whether V8 took the cache. */
function run(wrapped: string, filename: string, cachedData: Buffer | undefined, req: NodeRequire, file: string): Omit<Loaded, "from"> {
  const script = new Script(wrapped, { filename, cachedData });
  const fn = script.runInThisContext() as (exports: object, req: NodeRequire, module: { exports: object }, file: string, dir: string) => void;
  const mod = { exports: {} };
  fn.call(mod.exports, mod.exports, req, mod, file, dirname(file));
  return { rest: mod.exports as Rest, codeCache: !cachedData ? "none" : script.cachedDataRejected ? "rejected" : "accepted" };
}

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type * as RestModule from "./rest.js";

/** What dist/envd-rest.cjs (or the executable's rest asset) exports. */
export type Rest = typeof RestModule;

/**
 * How the rest is found, set by the bundler: "file" (build.sh: dist/envd-rest.cjs beside the
 * entry bundle), "sea" (scripts/package-sea.mjs: an asset of the single executable, with a V8
 * code cache made at build time); undefined in the plain tsc build (ES modules: rest.js).
 */
declare const ENVD_REST: "file" | "sea" | undefined;

/** The single executable's assets: the rest, already wrapped as a CommonJS function, and its code cache. */
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
  const source = readFileSync(file, "utf8");
  return async () => ({ rest: compileFile(file, source), from: "file" });
}

/**
 * Evaluates a CommonJS file from its source, read earlier, as require() would: through the
 * module loader's compile step, which uses Node's compile cache when dist/envd has turned it on.
 */
function compileFile(file: string, source: string): Rest {
  const Module = require("node:module") as unknown as {
    new (id: string, parent?: unknown): { filename: string; paths: string[]; loaded: boolean; exports: unknown; _compile(content: string, filename: string): void };
    _nodeModulePaths(dir: string): string[];
  };
  const mod = new Module(file, module);
  mod.filename = file;
  mod.paths = Module._nodeModulePaths(dirname(file));
  mod._compile(source, file);
  mod.loaded = true;
  return mod.exports as Rest;
}

function loadFromSea(): Loaded {
  const sea = require("node:sea") as typeof import("node:sea");
  const vm = require("node:vm") as typeof import("node:vm");
  const source = sea.getAsset(SEA_REST_ASSET, "utf8");
  let cachedData: Buffer | undefined;
  try {
    cachedData = Buffer.from(sea.getRawAsset(SEA_REST_CACHE) as ArrayBuffer);
  } catch {
    cachedData = undefined;
  }
  const script = new vm.Script(source, { filename: SEA_REST_ASSET, cachedData });
  const fn = script.runInThisContext() as (exports: object, req: NodeRequire, module: { exports: object }, file: string, dir: string) => void;
  const mod = { exports: {} };
  fn.call(mod.exports, mod.exports, require, mod, process.execPath, dirname(process.execPath));
  return { rest: mod.exports as Rest, from: "sea", codeCache: !cachedData ? "none" : script.cachedDataRejected ? "rejected" : "accepted" };
}

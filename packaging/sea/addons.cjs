"use strict";
// Loads envd's native dependencies inside the single executable build (SEA), where the embedded
// script can only require Node's built-in modules. scripts/package-sea.mjs aliases `node-pty` and
// `@napi-rs/xattr` to load() below; the files themselves ship beside the executable (unpacked
// tarball) or in /usr/lib/envd (installed), see packaging/install.sh.
const { createRequire } = require("node:module");
const { existsSync } = require("node:fs");
const { dirname, join } = require("node:path");

/** The file, relative to the library dir, each aliased package is loaded from. */
const FILES = {
  "node-pty": join("node_modules", "node-pty"),
  "@napi-rs/xattr": "xattr.node",
};

/** Library dirs in lookup order: $ENVD_ADDON_DIR, beside the executable, ../lib/envd, /usr/lib/envd. */
function libDirs(env = process.env, execPath = process.execPath) {
  const exe = dirname(execPath);
  const dirs = [env.ENVD_ADDON_DIR, exe, join(exe, "..", "lib", "envd"), "/usr/lib/envd"];
  return [...new Set(dirs.filter((d) => typeof d === "string" && d !== ""))];
}

/** Requires an aliased package from the first library dir that has it; the error names every place tried. */
function load(name, env = process.env, execPath = process.execPath) {
  const rel = FILES[name];
  if (!rel) throw new Error(`envd: no packaged location for ${name}`);
  const tried = libDirs(env, execPath).map((d) => join(d, rel));
  const file = tried.find((f) => existsSync(f));
  if (!file) throw new Error(`envd: ${name} not found (looked at ${tried.join(", ")})`);
  return createRequire(join(dirname(file), "noop.js"))(file);
}

module.exports = { load, libDirs, FILES };

#!/usr/bin/env node
// Builds the deployable artifact dist/envd-<version>-linux-<arch>.tar.gz (run by `./build.sh --artifact`):
//   envd                         the daemon as a Node single executable application (no Node needed)
//   inotify.node, xattr.node     native addons, loaded from beside the executable or /usr/lib/envd
//   node_modules/node-pty/       node-pty's JS and pty.node (it is JS + native, so it ships whole)
//   envd.service, install.sh     the systemd unit and the installer
// The SEA bundle differs from dist/envd only in how node-pty and @napi-rs/xattr are found
// (packaging/sea/addons.cjs); dist/envd itself is left untouched. Experiments: ENVD_SEA_MINIFY=0,
// ENVD_SEA_CODE_CACHE=0 (both on by default: the measured fastest start).
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(ROOT, "package.json"));
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
const VERSION = pkg.version;
const NAME = `envd-${VERSION}-linux-${process.arch}`;
const DIST = join(ROOT, "dist");
const WORK = join(DIST, "sea");
const STAGE = join(DIST, NAME);
const TARBALL = join(DIST, `${NAME}.tar.gz`);
const SHIM = join(ROOT, "packaging", "sea", "addons.cjs");
const FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";
/** Asset names src/envd/load-rest.ts reads (SEA_REST_ASSET, SEA_REST_CACHE). */
const REST_ASSET = "envd-rest.js";
const REST_CACHE = "envd-rest.cache";

const t0 = Date.now();
const step = (what) => process.stderr.write(`package: ${what} (${((Date.now() - t0) / 1000).toFixed(1)} s)\n`);

/** esbuild plugin: `node-pty` and `@napi-rs/xattr` become calls into the SEA addon loader. */
const seaExternals = {
  name: "sea-externals",
  setup(build) {
    build.onResolve({ filter: /^(node-pty|@napi-rs\/xattr)$/ }, (args) => ({ path: args.path, namespace: "sea-external" }));
    build.onLoad({ filter: /.*/, namespace: "sea-external" }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(SHIM)}).load(${JSON.stringify(args.path)});`,
      resolveDir: ROOT,
      loader: "js",
    }));
  },
};

/** The two bundles: envd's entry (the SEA's main script) and the rest it loads once listening (src/envd/load-rest.ts). */
async function bundle() {
  rmSync(WORK, { recursive: true, force: true });
  mkdirSync(WORK, { recursive: true });
  const common = {
    bundle: true,
    platform: "node",
    target: "node24",
    format: "cjs",
    // Whitespace and syntax only, as build.sh: mangled identifiers measured ~3 MiB more idle RSS.
    minifyWhitespace: process.env.ENVD_SEA_MINIFY !== "0",
    minifySyntax: process.env.ENVD_SEA_MINIFY !== "0",
    legalComments: "none",
    logLevel: "warning",
    define: { ENVD_VERSION: JSON.stringify(VERSION), ENVD_BUNDLED: "true", ENVD_REST: '"sea"', "import.meta.url": "undefined" },
    plugins: [seaExternals],
  };
  await esbuild.build({ ...common, entryPoints: [join(ROOT, "src", "envd", "main.ts")], outfile: join(WORK, "envd.cjs") });
  await esbuild.build({ ...common, entryPoints: [join(ROOT, "src", "envd", "rest.ts")], outfile: join(WORK, "rest.cjs") });
  // The rest asset is the bundle wrapped as a CommonJS module function; its code cache beside it.
  execFileSync(process.execPath, [join(ROOT, "scripts", "code-cache.mjs"), join(WORK, "rest.cjs"), join(WORK, REST_CACHE), join(WORK, REST_ASSET)], { stdio: "inherit" });
}

function blob() {
  const assets = { [REST_ASSET]: join(WORK, REST_ASSET) };
  if (process.env.ENVD_SEA_CODE_CACHE !== "0") assets[REST_CACHE] = join(WORK, REST_CACHE);
  const config = {
    main: join(WORK, "envd.cjs"),
    output: join(WORK, "sea-prep.blob"),
    disableExperimentalSEAWarning: true,
    useSnapshot: false,
    useCodeCache: process.env.ENVD_SEA_CODE_CACHE !== "0",
    assets,
  };
  writeFileSync(join(WORK, "sea-config.json"), JSON.stringify(config, null, 2));
  try {
    execFileSync(process.execPath, ["--experimental-sea-config", join(WORK, "sea-config.json")], { stdio: "pipe" });
  } catch (err) {
    process.stderr.write(`${err.stdout ?? ""}${err.stderr ?? ""}`);
    throw err;
  }
}

/** Copies this Node (debug info stripped when `strip` exists) and injects the blob into it. */
function executable(out) {
  copyFileSync(process.execPath, out);
  chmodSync(out, 0o755);
  try {
    execFileSync("strip", ["--strip-debug", out], { stdio: "ignore" });
  } catch {
    // no binutils: ship the binary with its debug info
  }
  // postject (LIEF) warns about Node's many ELF notes; its output is shown only when it fails.
  const cli = join(dirname(require.resolve("postject/package.json")), "dist", "cli.js");
  try {
    execFileSync(process.execPath, [cli, out, "NODE_SEA_BLOB", join(WORK, "sea-prep.blob"), "--sentinel-fuse", FUSE], { stdio: "pipe" });
  } catch (err) {
    process.stderr.write(`${err.stdout ?? ""}${err.stderr ?? ""}`);
    throw err;
  }
}

/** The .node file of the installed @napi-rs/xattr platform package. */
function xattrAddon() {
  const dir = dirname(require.resolve("@napi-rs/xattr/package.json"));
  const candidates = readdirSync(join(dir, "..")).filter((n) => n.startsWith(`xattr-linux-${process.arch}-gnu`));
  for (const name of candidates) {
    const pdir = join(dir, "..", name);
    const file = readdirSync(pdir).find((f) => f.endsWith(".node"));
    if (file) return join(pdir, file);
  }
  const local = readdirSync(dir).find((f) => f.endsWith(".node"));
  if (local) return join(dir, local);
  throw new Error(`no @napi-rs/xattr addon for linux-${process.arch}`);
}

/** node-pty's runtime files: package.json, license, lib/*.js without tests/maps, the native build. */
function stageNodePty(dest) {
  const src = dirname(require.resolve("node-pty/package.json"));
  mkdirSync(dest, { recursive: true });
  for (const f of ["package.json", "LICENSE"]) if (existsSync(join(src, f))) copyFileSync(join(src, f), join(dest, f));
  cpSync(join(src, "lib"), join(dest, "lib"), {
    recursive: true,
    filter: (p) => statSync(p).isDirectory() || (p.endsWith(".js") && !p.endsWith(".test.js")),
  });
  const release = join(src, "build", "Release");
  mkdirSync(join(dest, "build", "Release"), { recursive: true });
  for (const f of ["pty.node", "spawn-helper"]) {
    if (existsSync(join(release, f))) copyFileSync(join(release, f), join(dest, "build", "Release", f));
  }
  if (!existsSync(join(dest, "build", "Release", "pty.node"))) throw new Error("node-pty is not built (no build/Release/pty.node)");
}

function stage() {
  rmSync(STAGE, { recursive: true, force: true });
  mkdirSync(STAGE, { recursive: true });
  copyFileSync(join(WORK, "envd"), join(STAGE, "envd"));
  chmodSync(join(STAGE, "envd"), 0o755);
  const inotify = join(ROOT, "native", "build", "Release", "inotify.node");
  if (existsSync(inotify)) copyFileSync(inotify, join(STAGE, "inotify.node"));
  else process.stderr.write("package: warning: native/ (the addon) is not built; the artifact ships without it\n");
  copyFileSync(xattrAddon(), join(STAGE, "xattr.node"));
  stageNodePty(join(STAGE, "node_modules", "node-pty"));
  copyFileSync(join(ROOT, "packaging", "envd.service"), join(STAGE, "envd.service"));
  copyFileSync(join(ROOT, "packaging", "install.sh"), join(STAGE, "install.sh"));
  chmodSync(join(STAGE, "install.sh"), 0o755);
  writeFileSync(join(STAGE, "VERSION"), `${VERSION}\n`);
}

/** The staged executable must run without any Node around it and report our version. */
function smoke() {
  const out = execFileSync(join(STAGE, "envd"), ["--version"], { encoding: "utf8", env: { PATH: "/usr/bin:/bin" } }).trim();
  if (!out.includes(VERSION)) throw new Error(`staged envd --version printed '${out}', expected ${VERSION}`);
}

await bundle();
step("bundled");
blob();
step("blob written");
executable(join(WORK, "envd"));
step("executable injected");
stage();
smoke();
execFileSync("tar", ["-C", DIST, "--owner=0", "--group=0", "-czf", TARBALL, NAME]);
step(`wrote ${TARBALL} (${(statSync(TARBALL).size / 1e6).toFixed(1)} MB)`);

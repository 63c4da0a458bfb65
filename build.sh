#!/usr/bin/env bash
# Builds dist/envd: type-checks, then bundles the daemon into one CommonJS file with esbuild.
# Native addons (node-pty, @napi-rs/xattr, our inotify addon) stay external and load from disk.
set -euo pipefail
cd "$(dirname "$0")"
VERSION=$(node -p 'require("./package.json").version')
npx tsc -p tsconfig.json --noEmit
# inotify addon used by filesystem watching (src/filesystem/inotify.ts looks for it here, or in /usr/lib/envd).
npx node-gyp rebuild -C native/inotify >/dev/null 2>&1 || { npx node-gyp rebuild -C native/inotify; exit 1; }
mkdir -p dist
echo '{"type":"commonjs"}' > dist/package.json
# Whitespace and comments are dropped (names stay, as in stack traces): V8 keeps the bundle's
# source in the heap for the life of the process, and one non-ASCII character in a kept comment
# made it a two-byte string of twice the file size. A heap above V8's 8 MiB activation threshold
# runs a full mark-compact every few MiB of Buffers a streaming upload allocates (the shipped SEA
# bundle is minified anyway, see scripts/package-sea.mjs).
npx esbuild src/main.ts --bundle --platform=node --target=node20 --format=cjs \
  --outfile=dist/envd --log-level=warning \
  --external:node-pty --external:@napi-rs/xattr \
  --define:ENVD_VERSION="\"$VERSION\"" \
  --banner:js='#!/usr/bin/env node' \
  --minify-whitespace --legal-comments=none
chmod +x dist/envd

# ---- Packaging (issue 7; owned by the packaging helper) ----
# `./build.sh --artifact` also builds dist/envd-<version>-linux-<arch>.tar.gz: the daemon as a Node
# single executable (no Node needed in the image), its addons, envd.service and install.sh.
if [ "${1:-}" = "--artifact" ]; then
  node scripts/package-sea.mjs
fi

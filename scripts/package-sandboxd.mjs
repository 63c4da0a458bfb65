#!/usr/bin/env node
// Builds dist/sandboxd-<version>-linux-<arch>.tar.gz (run by `./build.sh --artifact`, after envd's):
//   sandboxd          launcher: runs the bundle with the Node shipped beside it
//   lib/sandboxd.cjs  the bundle (dist/sandboxd.cjs), lib/node the Node 24 binary (node:sqlite built in)
//   envd/             the envd release artifact sandboxes run (the default --envd-dir)
//   sandboxd.service  the systemd unit, install.sh installs the release and enables the unit
// System tools it calls at run time: openssl, runc, ip, nft, mount, debootstrap, tini.
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const VERSION = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version;
const ARCH = process.arch;
const NAME = `sandboxd-${VERSION}-linux-${ARCH}`;
const DIST = join(ROOT, "dist");
const STAGE = join(DIST, NAME);
const TARBALL = join(DIST, `${NAME}.tar.gz`);
const NODE = join(ROOT, "node_modules", `node-linux-${ARCH}`, "bin", "node");
const ENVD = join(DIST, `envd-${VERSION}-linux-${ARCH}`);

for (const [what, path] of [["dist/sandboxd.cjs (run ./build.sh)", join(DIST, "sandboxd.cjs")], ["the Node 24 binary (npm ci)", NODE], ["the envd artifact (scripts/package-sea.mjs)", join(ENVD, "envd")]]) {
  if (!existsSync(path)) throw new Error(`package-sandboxd: ${what} is missing: ${path}`);
}

rmSync(STAGE, { recursive: true, force: true });
mkdirSync(join(STAGE, "lib"), { recursive: true });
copyFileSync(join(DIST, "sandboxd.cjs"), join(STAGE, "lib", "sandboxd.cjs"));
writeFileSync(join(STAGE, "lib", "package.json"), '{"type":"commonjs"}\n');
copyFileSync(NODE, join(STAGE, "lib", "node"));
chmodSync(join(STAGE, "lib", "node"), 0o755);
cpSync(ENVD, join(STAGE, "envd"), { recursive: true });
// The dashboard's page, script and styles: served from dashboard/ beside the bundle.
cpSync(join(DIST, "dashboard"), join(STAGE, "lib", "dashboard"), { recursive: true });
// The bundle looks for envd/ beside its own file (lib/), so the launcher names the directory.
// sandboxd's memory settings (V8 flags, glibc's arena count) are the development launcher's.
const [memoryFlags, memoryEnv] = execFileSync("sh", [join(ROOT, "scripts", "launcher.sh"), "--sandboxd-memory"], { encoding: "utf8" }).split("\n");
const envPrefix = memoryEnv.split(" ").filter(Boolean).map((kv) => { const [k, v] = kv.split("="); return `${k}=\${${k}:-${v}} `; }).join("");
writeFileSync(
  join(STAGE, "sandboxd"),
  `#!/bin/sh
# sandboxd ${VERSION}: runs the control plane with the Node shipped beside it.
here=$(dirname "$(readlink -f "$0")")
: "\${SANDBOXD_ENVD_DIR:=$here/envd}"
export SANDBOXD_ENVD_DIR
${envPrefix}exec "$here/lib/node" ${memoryFlags} "$here/lib/sandboxd.cjs" "$@"
`,
);
chmodSync(join(STAGE, "sandboxd"), 0o755);
writeFileSync(join(STAGE, "VERSION"), `${VERSION}\n`);
copyFileSync(join(ROOT, "packaging", "sandboxd.service"), join(STAGE, "sandboxd.service"));
copyFileSync(join(ROOT, "packaging", "sandboxd-install.sh"), join(STAGE, "install.sh"));
chmodSync(join(STAGE, "install.sh"), 0o755);

const out = execFileSync(join(STAGE, "sandboxd"), ["--version"], { encoding: "utf8", env: { PATH: "/usr/bin:/bin" } }).trim();
if (out !== VERSION) throw new Error(`staged sandboxd --version printed '${out}', expected ${VERSION}`);
execFileSync("tar", ["-C", DIST, "--owner=0", "--group=0", "-czf", TARBALL, NAME]);
process.stderr.write(`package: wrote ${TARBALL} (${(statSync(TARBALL).size / 1e6).toFixed(1)} MB)\n`);

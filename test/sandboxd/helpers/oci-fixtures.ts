/**
 * Test images, made with umoci once per machine (and base rootfs) in an OCI layout under the
 * cache dir: the cached debootstrap base as an image ("debian"), an app image over it with its own
 * Env, WorkingDir, User, a whiteout and an Entrypoint ("app"), one without user `user`
 * ("nouser"), a musl-like one ("musl"), an arm64 one ("arm64") and a multi-arch index of
 * linux/amd64 and linux/arm64 ("multi").
 */
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { takeLock } from "../../../src/sandboxd/images/lock.js";
import { MAPPED_RANGE, MAPPED_ROOT } from "../../../src/sandboxd/host/idmap.js";

/** Bump when the images below change. */
const REVISION = 1;

function umoci(...args: string[]): void {
  const r = spawnSync("umoci", ["--log", "error", ...args], { encoding: "utf8", timeout: 600_000 });
  if (r.status !== 0) throw new Error(`umoci ${args.slice(0, 3).join(" ")} failed: ${r.stderr}`);
}

/** A directory of files to insert, made from `files` (path → content, or a host file to copy with `@`). */
function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "oci-fixture-"));
  for (const [p, content] of Object.entries(files)) {
    mkdirSync(join(dir, p, ".."), { recursive: true });
    if (content.startsWith("@")) copyFileSync(content.slice(1), join(dir, p));
    else writeFileSync(join(dir, p), content, { mode: p.endsWith(".sh") ? 0o755 : 0o644 });
  }
  return dir;
}

/** Adds `files` to image `img` of `layout` as one layer. */
function insert(layout: string, img: string, files: Record<string, string>): void {
  const dir = tree(files);
  try {
    chmodSync(dir, 0o755);
    umoci("insert", "--no-history", "--image", `${layout}:${img}`, dir, "/");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Adds an index of `tags` (each with its platform) to the layout as `name`. */
function addIndex(layout: string, name: string, tags: { tag: string; arch: string }[]): void {
  const index = JSON.parse(readFileSync(join(layout, "index.json"), "utf8")) as { manifests: { digest: string; size: number; mediaType: string; annotations?: Record<string, string> }[] };
  const entries = tags.map(({ tag, arch }) => {
    const m = index.manifests.find((d) => d.annotations?.["org.opencontainers.image.ref.name"] === tag)!;
    return { mediaType: m.mediaType, digest: m.digest, size: m.size, platform: { architecture: arch, os: "linux" } };
  });
  const blob = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: entries }));
  const digest = createHash("sha256").update(blob).digest("hex");
  writeFileSync(join(layout, "blobs", "sha256", digest), blob);
  index.manifests.push({ mediaType: "application/vnd.oci.image.index.v1+json", digest: `sha256:${digest}`, size: blob.length, annotations: { "org.opencontainers.image.ref.name": name } });
  writeFileSync(join(layout, "index.json"), JSON.stringify(index));
}

/** Builds every fixture image into `layout` from the base rootfs. */
function build(layout: string, baseRootfs: string): void {
  const map = `0:${MAPPED_ROOT}:${MAPPED_RANGE}`;
  umoci("init", "--layout", layout);
  umoci("new", "--image", `${layout}:debian`);
  umoci("insert", "--no-history", "--uid-map", map, "--gid-map", map, "--image", `${layout}:debian`, baseRootfs, "/");
  const passwd = readFileSync(join(baseRootfs, "etc/passwd"), "utf8");
  const group = readFileSync(join(baseRootfs, "etc/group"), "utf8");

  umoci("config", "--no-history", "--image", `${layout}:debian`, "--tag", "app", "--config.env", "APP_GREETING=hello from the image", "--config.workingdir", "/srv/app", "--config.user", "1001", "--config.entrypoint", "/srv/app/start.sh");
  insert(layout, "app", {
    "srv/app/hello.txt": "hello from the app image\n",
    "srv/app/start.sh": "#!/bin/sh\necho \"started with $*\" > /tmp/started.txt\nexec sleep 600\n",
    "etc/passwd": `${passwd}app:x:1001:1001::/srv/app:/bin/bash\n`,
    "etc/group": `${group}app:x:1001:\n`,
  });
  umoci("insert", "--no-history", "--image", `${layout}:app`, "--whiteout", "/usr/share/doc");

  umoci("config", "--no-history", "--image", `${layout}:debian`, "--tag", "nouser");
  insert(layout, "nouser", {
    "etc/passwd": passwd.split("\n").filter((l) => !l.startsWith("user:")).join("\n"),
    "etc/group": group.split("\n").filter((l) => !l.startsWith("user:")).join("\n"),
  });
  umoci("insert", "--no-history", "--image", `${layout}:nouser`, "--whiteout", "/home/user");

  umoci("config", "--no-history", "--image", `${layout}:debian`, "--tag", "amd64");
  insert(layout, "amd64", { "etc/fixture-arch": "amd64\n" });

  umoci("new", "--image", `${layout}:musl`);
  insert(layout, "musl", { "bin/sh": "@/bin/dash", "lib/ld-musl-x86_64.so.1": "@/bin/dash", "etc/passwd": "root:x:0:0:root:/root:/bin/sh\n" });

  umoci("new", "--image", `${layout}:arm64`);
  umoci("config", "--no-history", "--image", `${layout}:arm64`, "--architecture", "arm64");
  insert(layout, "arm64", { "etc/fixture-arch": "arm64\n" });
  addIndex(layout, "multi", [{ tag: "arm64", arch: "arm64" }, { tag: "amd64", arch: "amd64" }]);
}

/** The fixture layout (built once per machine and base rootfs, under a lock). */
export async function fixtureLayout(cacheDir: string, baseRootfs: string): Promise<string> {
  const dir = join(cacheDir, `oci-fixtures-${REVISION}-${basename(join(baseRootfs, ".."))}`);
  const layout = join(dir, "layout");
  if (existsSync(join(dir, "done"))) return layout;
  const release = await takeLock(`${dir}.lock`, { timeoutMs: 15 * 60_000 });
  try {
    if (existsSync(join(dir, "done"))) return layout;
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { mode: 0o700 });
    try {
      build(join(tmp, "layout"), baseRootfs);
      writeFileSync(join(tmp, "done"), new Date().toISOString());
      rmSync(dir, { recursive: true, force: true });
      renameSync(tmp, dir);
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      throw err;
    }
    return layout;
  } finally {
    release();
  }
}

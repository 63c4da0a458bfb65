/**
 * What a pulled image's config says a container starts with (Env, WorkingDir, User,
 * Entrypoint, Cmd), and what the image must hold for a sandbox to run in it: envd is a glibc
 * program started by /bin/sh, and the SDK's commands run under /bin/bash.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { statInRootFollowing } from "../../host/in-root.js";
import { hostArch } from "./manifest.js";

/** The parts of an image config builds honour. */
export interface ImageConfig {
  env: Record<string, string>;
  workdir?: string;
  user?: string;
  entrypoint?: string[];
  cmd?: string[];
}

const strings = (v: unknown): string[] | undefined => (Array.isArray(v) && v.every((s) => typeof s === "string") ? (v as string[]) : undefined);

/** Reads the config blob `digest` from the blob directory; throws when it is not an image config for this host. */
export function readImageConfig(blobDir: string, digest: string): ImageConfig {
  const raw = readFileSync(join(blobDir, "sha256", digest.slice("sha256:".length)), "utf8");
  const j = JSON.parse(raw) as { architecture?: string; os?: string; config?: Record<string, unknown> };
  if (j.os && j.os !== "linux") throw new Error(`the image is for ${j.os}, not linux`);
  if (j.architecture && j.architecture !== hostArch()) throw new Error(`the image is for ${j.architecture}; this host runs ${hostArch()} (name a multi-arch image or one built for ${hostArch()})`);
  const c = j.config ?? {};
  const env: Record<string, string> = {};
  for (const e of strings(c.Env) ?? []) {
    const i = e.indexOf("=");
    if (i > 0) env[e.slice(0, i)] = e.slice(i + 1);
  }
  const text = (v: unknown) => (typeof v === "string" && v.trim() !== "" ? v.trim() : undefined);
  return { env, workdir: text(c.WorkingDir), user: text(c.User), entrypoint: strings(c.Entrypoint), cmd: strings(c.Cmd) };
}

/** What an unpacked image lacks for sandboxes (fatal) and what it lacks that E2B's base has (warnings). */
export interface ImageFitness {
  missing: string[];
  warnings: string[];
}

const LOADERS: Record<string, string> = { amd64: "lib64/ld-linux-x86-64.so.2", arm64: "lib/ld-linux-aarch64.so.1" };
const LIB_DIRS = ["lib", "usr/lib", "lib64", "usr/lib64", "lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu"];

/** Checks an unpacked rootfs (paths resolved inside it, links followed only within it). */
export function checkImage(root: string): ImageFitness {
  const missing: string[] = [];
  const warnings: string[] = [];
  const has = (p: string) => statInRootFollowing(root, p)?.isFile() === true;
  if (!has("bin/sh")) missing.push("/bin/sh (sandboxd starts envd and build steps with it)");
  const loader = LOADERS[hostArch()];
  const glibc = loader ? has(loader) : true;
  const stdcxx = LIB_DIRS.some((d) => has(`${d}/libstdc++.so.6`));
  if (!glibc || !stdcxx) {
    const musl = has("lib/ld-musl-x86_64.so.1") || has("lib/ld-musl-aarch64.so.1");
    const lacks = [...(glibc ? [] : [`the glibc loader /${loader}`]), ...(stdcxx ? [] : ["libstdc++.so.6"])].join(" and ");
    missing.push(`${lacks}: envd (the daemon every sandbox runs) is a glibc program${musl ? "; this is a musl image (Alpine), which cannot run it" : ""}. Use a glibc-based image (Debian, Ubuntu, python:*, node:*) or install glibc and libstdc++ in the image`);
  }
  if (!has("bin/bash")) missing.push("/bin/bash (the SDK's commands.run runs commands with /bin/bash -l -c)");
  if (!has("usr/bin/sudo") && !has("bin/sudo")) warnings.push("the image has no sudo: user 'user' gets no passwordless sudo as in E2B's base image (run root steps with runCmd(cmd, { user: 'root' }))");
  return { missing, warnings };
}

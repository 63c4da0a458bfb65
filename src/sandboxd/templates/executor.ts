import { randomBytes } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, rmdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { BuildLogEntry } from "../store/builds.js";
import type { HeldFiles } from "./files.js";
import { statInRootFollowing } from "../runtime/in-root.js";
import { chainKey, flatten, type LayerCache } from "./layers.js";
import { lookupUser, runInBuild } from "./runner.js";
import type { BuildSpec, Step } from "./steps.js";
import type { BaseImage } from "./base-images.js";

/** A build that failed in a step, with the message the API's `reason` shows. */
export class BuildFailure extends Error {
  constructor(message: string, readonly step?: string) {
    super(message);
  }
}

/** What the executor needs from its surroundings. */
export interface ExecutorContext {
  cache: LayerCache;
  /** Where a build keeps its build sandboxes' bundles while it runs (`<dir>/<buildID>`). */
  buildsDir: string;
  /** Where flattened root filesystems are cached, by the key of the build's last step (`<dir>/<key>`). */
  rootfsDir: string;
  runcRoot: string;
  tiniPath: string;
  cgroupParent: string;
  /** Who the build is for: part of every layer key, so no team is ever served (or learns of) another's layers. */
  scope: string;
  /** The SHA-256 of the stored upload of a COPY's files hash, or undefined when it was never uploaded. */
  filesDigest(filesHash: string): string | undefined;
  /** The unpacked files of that upload, held until released (undefined when gone). */
  holdFiles(filesHash: string, digest: string): Promise<HeldFiles | undefined>;
  /** The rootfs a fromImage or fromTemplate names, pulled if need be (throws a BuildFailure when none). */
  baseOf(spec: BuildSpec, signal: AbortSignal): Promise<BaseImage>;
  log(e: Omit<BuildLogEntry, "timestamp">): void;
  stepTimeoutMs: number;
}

/** The state a build carries from step to step, and what a finished build sets on its template. */
export interface BuildOutcome {
  rootfs: string;
  user: string;
  workdir: string;
  envs: Record<string, string>;
}

/** Where a COPY's unpacked files are mounted (read-only) in its build sandbox. */
const COPY_MOUNT = "/.sandboxd-copy";

/** Adds user `user` as E2B's builder does (useradd, else busybox adduser, else by hand), with sudo rights when sudo is there. */
const PREPARE_SCRIPT = [
  "set -e",
  "if ! grep -q '^user:' /etc/passwd 2>/dev/null; then",
  "  sh=/bin/sh; [ -x /bin/bash ] && sh=/bin/bash",
  "  if command -v useradd >/dev/null 2>&1; then useradd -m -s \"$sh\" user",
  "  elif command -v adduser >/dev/null 2>&1; then adduser -D -s \"$sh\" user",
  "  else uid=1000; while grep -q \"^[^:]*:[^:]*:$uid:\" /etc/passwd; do uid=$((uid+1)); done",
  "    echo \"user:x:$uid:$uid::/home/user:$sh\" >> /etc/passwd; echo \"user:x:$uid:\" >> /etc/group",
  "    mkdir -p /home/user; chown \"$uid:$uid\" /home/user; fi",
  "fi",
  "if [ -x /usr/bin/sudo ] || [ -x /bin/sudo ]; then mkdir -p /etc/sudoers.d; echo 'user ALL=(ALL:ALL) NOPASSWD: ALL' > /etc/sudoers.d/user; chmod 440 /etc/sudoers.d/user; fi",
].join("\n");

const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The shell script a COPY runs inside the build sandbox, with Docker's rules for a trailing slash. */
function copyScript(src: string, dest: string, owner: string, mode: string): string {
  return [
    "set -e",
    `src=/.sandboxd-copy/${shq(src.replace(/^\.?\/+/, ""))}; dest=${shq(dest)}`,
    `[ -e "$src" ] || [ -L "$src" ] || { echo "COPY: ${src.replace(/[`$"\\]/g, "")} is not in the uploaded files" >&2; exit 1; }`,
    `if [ -d "$src" ] && [ ! -L "$src" ]; then mkdir -p "$dest"; cp -a "$src"/. "$dest"/; target="$dest"`,
    `else case "$dest" in */) mkdir -p "$dest"; target="$dest$(basename "$src")";; *) mkdir -p "$(dirname "$dest")"; target="$dest";; esac; cp -a "$src" "$target"; fi`,
    `chown -R ${shq(owner)} "$target"`,
    ...(mode ? [`chmod -R ${shq(mode)} "$target"`] : []),
  ].join("\n");
}

/**
 * Whether the image has `user`: looked up in the topmost layer that has an /etc/passwd (a layer
 * that deleted it, or a user missing there, answers no: the USER step then runs).
 */
function userInStack(stack: string[], user: string): boolean {
  for (let i = stack.length - 1; i >= 0; i--) {
    // lstat only: a layer's etc may be a link the template made (to anywhere on the host)
    if (lstatSync(join(stack[i], "etc"), { throwIfNoEntry: false })?.isDirectory() && lstatSync(join(stack[i], "etc", "passwd"), { throwIfNoEntry: false })) {
      return lookupUser(stack[i], user) !== undefined;
    }
  }
  return false;
}

/**
 * Runs a build's steps as layers over its base, each in its own build sandbox, and flattens the
 * result into `<rootfsDir>/<key of the last step>`. Layers and flattened root filesystems come
 * from the cache unless a step (or the build) is forced; every step logs what it did, and a
 * failure names the step.
 */
export async function executeBuild(ctx: ExecutorContext, buildID: string, spec: BuildSpec, memoryMB: number, signal: AbortSignal): Promise<BuildOutcome> {
  const base = await ctx.baseOf(spec, signal);
  try {
    return await executeOn(ctx, base, buildID, spec, memoryMB, signal);
  } finally {
    base.image?.release();
  }
}

/** executeBuild over a resolved base: a pulled image's config is where the steps start. */
async function executeOn(ctx: ExecutorContext, baseImage: BaseImage, buildID: string, spec: BuildSpec, memoryMB: number, signal: AbortSignal): Promise<BuildOutcome> {
  const base = baseImage.rootfs;
  const stack = [base];
  let key = chainKey("base", { scope: ctx.scope, base });
  const image = baseImage.image?.config;
  let user = image?.user ?? spec.initialUser;
  let workdir = image?.workdir ?? spec.initialWorkdir;
  const envs: Record<string, string> = { ...image?.env };
  let forced = spec.force;
  const n = spec.steps.length;
  const bundles = join(ctx.buildsDir, buildID, "bundles");
  mkdirSync(bundles, { recursive: true, mode: 0o700 });

  const run = async (step: string, mnt: string, argv: string[], as: string, binds?: { source: string; destination: string }[]) => {
    const id = `b${buildID.replace(/-/g, "").slice(0, 12)}-${randomBytes(4).toString("hex")}`;
    const bundleDir = join(bundles, id);
    mkdirSync(bundleDir, { mode: 0o700 });
    let code: number | null;
    try {
      code = await runInBuild({
        id, bundleDir, rootfs: mnt, runcRoot: ctx.runcRoot, tiniPath: ctx.tiniPath, cgroupParent: ctx.cgroupParent, memoryMB,
        argv, user: as, env: envs, cwd: statInRootFollowing(mnt, workdir)?.isDirectory() ? workdir : "/", binds, timeoutMs: ctx.stepTimeoutMs, signal,
        onLine: (line) => ctx.log({ level: "info", message: line, step }),
      });
    } catch (err) {
      throw new BuildFailure(`step ${step} failed: ${(err as Error).message}`, step);
    } finally {
      rmSync(bundleDir, { recursive: true, force: true });
    }
    signal.throwIfAborted();
    if (code !== 0) throw new BuildFailure(`step ${step} failed: the command exited with ${code === null ? "a signal" : `code ${code}`}`, step);
  };

  if (baseImage.image) {
    // E2B's user phase: user `user` (with passwordless sudo where the image has sudo), once per image
    key = chainKey(key, { prepare: PREPARE_SCRIPT });
    const cached = forced ? undefined : ctx.cache.get(key);
    ctx.log({ level: "info", message: `${cached ? "CACHED " : ""}adding user 'user' to the image where it lacks one`, step: "base" });
    stack.push(cached ?? (await ctx.cache.make(key, stack, (mnt) => run("base", mnt, ["/bin/sh", "-c", PREPARE_SCRIPT], "0"))));
  }
  for (let i = 0; i < n; i++) {
    signal.throwIfAborted();
    const s: Step = spec.steps[i];
    const step = String(i + 1);
    const what = `[${i + 1}/${n}] ${s.type} ${s.args.filter(Boolean).join(" ")}`.slice(0, 300);
    forced ||= !!s.force;
    // a COPY's layer is of the bytes stored, not of the hash the client named
    const digest = s.type === "COPY" && s.filesHash ? ctx.filesDigest(s.filesHash) : undefined;
    if (s.type === "COPY" && !digest) {
      throw new BuildFailure(
        s.filesHash
          ? `step ${step} failed: COPY ${s.args[0]}: its files (hash ${s.filesHash}) were never uploaded, or were evicted to keep the team's storage quota; build again to upload them`
          : `step ${step} failed: COPY ${s.args[0]}: the Dockerfile API has no build context; build with the SDK's Template().fromDockerfile() to copy files`,
        step,
      );
    }
    key = chainKey(key, { type: s.type, args: s.args, filesHash: s.filesHash ?? null, digest: digest ?? null, user, workdir, envs, ...(forced ? { forced: buildID } : {}) });
    if (s.type === "ENV") {
      for (let j = 0; j < s.args.length; j += 2) envs[s.args[j]] = s.args[j + 1];
      ctx.log({ level: "info", message: what, step });
      continue;
    }
    const cached = forced ? undefined : ctx.cache.get(key);
    if (s.type === "USER" && !cached && userInStack(stack, s.args[0])) {
      // the user exists: nothing to change, no build sandbox and no layer
      ctx.log({ level: "info", message: what, step });
    } else if (cached) {
      stack.push(cached);
      ctx.log({ level: "info", message: `CACHED ${what} (layer ${key.slice(0, 12)})`, step });
    } else {
      ctx.log({ level: "info", message: what, step });
      let script: string;
      let as = "root";
      let binds: { source: string; destination: string }[] | undefined;
      let held: HeldFiles | undefined;
      if (s.type === "RUN") {
        script = s.args[0];
        as = s.args[1] || user;
      } else if (s.type === "USER") {
        script = `id -u ${shq(s.args[0])} >/dev/null 2>&1 || useradd -m -s /bin/bash ${shq(s.args[0])}`;
      } else if (s.type === "WORKDIR") {
        const dir = s.args[0].startsWith("/") ? s.args[0] : join(workdir, s.args[0]);
        script = `[ -d ${shq(dir)} ] || { mkdir -p ${shq(dir)} && chown ${shq(user)} ${shq(dir)}; }`;
      } else {
        try {
          held = await ctx.holdFiles(s.filesHash!, digest!);
        } catch (err) {
          throw new BuildFailure(`step ${step} failed: COPY ${s.args[0]}: ${(err as Error).message}`, step);
        }
        if (!held) throw new BuildFailure(`step ${step} failed: COPY ${s.args[0]}: its files (hash ${s.filesHash}) were evicted meanwhile; build again`, step);
        script = copyScript(s.args[0], s.args[1].startsWith("/") ? s.args[1] : join(workdir, s.args[1]) + (s.args[1].endsWith("/") ? "/" : ""), s.args[2] || user, s.args[3] ?? "");
        binds = [{ source: held.dir, destination: COPY_MOUNT }];
      }
      const bash = statInRootFollowing(stack[0], "/bin/bash")?.isFile() ? "/bin/bash" : "/bin/sh";
      try {
        stack.push(
          await ctx.cache.make(key, stack, async (mnt) => {
            try {
              await run(step, mnt, [bash, "-c", script], as, binds);
            } finally {
              // the mount point runc made for the files is not part of the layer (rmdir never follows a link)
              if (binds) {
                try {
                  rmdirSync(join(mnt, COPY_MOUNT));
                } catch {
                  // not made (the step failed before runc mounted it)
                }
              }
            }
          }),
        );
      } finally {
        held?.release();
      }
    }
    if (s.type === "USER") user = s.args[0];
    if (s.type === "WORKDIR") workdir = s.args[0].startsWith("/") ? s.args[0] : join(workdir, s.args[0]);
  }
  signal.throwIfAborted();
  const out = join(ctx.rootfsDir, key);
  let rootfs: string;
  try {
    if (existsSync(out)) {
      ctx.log({ level: "info", message: `CACHED finalize: the flattened rootfs of these layers (${key.slice(0, 12)})`, step: "finalize" });
      rootfs = out;
    } else {
      ctx.log({ level: "info", message: `finalize: flattening ${stack.length - 1} layer(s)`, step: "finalize" });
      mkdirSync(ctx.rootfsDir, { recursive: true, mode: 0o711 });
      rootfs = await flatten(stack, out).catch((err: Error) => {
        // another build of the same layers finished first
        if (existsSync(out)) return out;
        throw err;
      });
    }
    if (!lookupUser(rootfs, user)) throw new Error(`the default user '${user}' does not exist in the image`);
  } catch (err) {
    throw new BuildFailure(`finalize failed: ${(err as Error).message}`, "finalize");
  }
  rmSync(join(ctx.buildsDir, buildID), { recursive: true, force: true });
  return { rootfs, user, workdir, envs };
}

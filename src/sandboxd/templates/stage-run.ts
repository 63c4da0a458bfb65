/**
 * One stage of a build: its steps run as layers over the stage's stack, each in its own build
 * sandbox (cached by the layer key chain unless forced), with the user, working directory and
 * environment the steps leave. COPY takes its files from an upload or, for a Dockerfile's
 * `--from`, from an earlier stage mounted read-only; sources may be globs.
 */
import { randomBytes } from "node:crypto";
import { lstatSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { statInRootFollowing } from "../host/in-root.js";
import { BuildFailure } from "./build-failure.js";
import type { ExecutorContext } from "./build-context.js";
import type { HeldFiles } from "./files.js";
import { chainKey } from "./layers.js";
import { lookupUser, runInBuild } from "./runner.js";
import type { Step } from "./steps.js";

/** Where a stage is: its layer stack (bottom first), the key of its top, and what its steps set. */
export interface StageState {
  stack: string[];
  key: string;
  user: string;
  workdir: string;
  envs: Record<string, string>;
  forced: boolean;
  /** The key of the pulled image at the bottom of the stack (which the image cache may prune), if one is. */
  pulled?: string;
}

/** What every stage of one build shares. */
export interface StageEnv {
  ctx: ExecutorContext;
  buildID: string;
  memoryMB: number;
  signal: AbortSignal;
  /** An earlier stage's files for COPY --from: a directory and the key of what it holds. */
  source(stage: number): Promise<{ dir: string; key: string }>;
}

/** Where a COPY's files are mounted (read-only) in its build sandbox. */
const COPY_MOUNT = "/.sandboxd-copy";

const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The shell script a COPY runs inside the build sandbox, with Docker's rules: a source glob
 * (several matches make the destination a directory), a directory's contents copied, a trailing
 * slash naming a directory.
 */
function copyScript(src: string, dest: string, owner: string, mode: string, from: string): string {
  return [
    "set -e",
    `pat=${shq(src.replace(/^\.?\/+/, ""))}; dest=${shq(dest)}; IFS=''`,
    `n=0; for src in /.sandboxd-copy/$pat; do [ -e "$src" ] || [ -L "$src" ] && n=$((n+1)); done`,
    `[ "$n" -gt 0 ] || { echo "COPY: ${src.replace(/[`$"\\]/g, "")} is not in ${from}" >&2; exit 1; }`,
    `[ "$n" -gt 1 ] && case "$dest" in */) ;; *) dest="$dest/";; esac`,
    `for src in /.sandboxd-copy/$pat; do [ -e "$src" ] || [ -L "$src" ] || continue`,
    `if [ -d "$src" ] && [ ! -L "$src" ]; then mkdir -p "$dest"; cp -a "$src"/. "$dest"/; target="$dest"`,
    `else case "$dest" in */) mkdir -p "$dest"; target="$dest$(basename "$src")";; *) mkdir -p "$(dirname "$dest")"; target="$dest";; esac; cp -a "$src" "$target"; fi`,
    `chown -R ${shq(owner)} "$target"`,
    ...(mode ? [`chmod -R ${shq(mode)} "$target"`] : []),
    "done",
  ].join("\n");
}

/** Adds user `user` as E2B's builder does (useradd, else busybox adduser, else by hand), with sudo rights when sudo is there. */
export const PREPARE_SCRIPT = [
  "set -e",
  "if ! grep -q '^user:' /etc/passwd 2>/dev/null; then",
  '  sh=/bin/sh; [ -x /bin/bash ] && sh=/bin/bash',
  '  if command -v useradd >/dev/null 2>&1; then useradd -m -s "$sh" user',
  '  elif command -v adduser >/dev/null 2>&1; then adduser -D -s "$sh" user',
  '  else uid=1000; while grep -q "^[^:]*:[^:]*:$uid:" /etc/passwd; do uid=$((uid+1)); done',
  '    echo "user:x:$uid:$uid::/home/user:$sh" >> /etc/passwd; echo "user:x:$uid:" >> /etc/group',
  '    mkdir -p /home/user; chown "$uid:$uid" /home/user; fi',
  "fi",
  "if [ -x /usr/bin/sudo ] || [ -x /bin/sudo ]; then mkdir -p /etc/sudoers.d; echo 'user ALL=(ALL:ALL) NOPASSWD: ALL' > /etc/sudoers.d/user; chmod 440 /etc/sudoers.d/user; fi",
].join("\n");

/**
 * Whether the image has `user`: looked up in the topmost layer that has an /etc/passwd (a layer
 * that deleted it, or a user missing there, answers no: the USER step then runs).
 */
export function userInStack(stack: string[], user: string): boolean {
  for (let i = stack.length - 1; i >= 0; i--) {
    // lstat only: a layer's etc may be a link the template made (to anywhere on the host)
    if (lstatSync(join(stack[i], "etc"), { throwIfNoEntry: false })?.isDirectory() && lstatSync(join(stack[i], "etc", "passwd"), { throwIfNoEntry: false })) {
      return lookupUser(stack[i], user) !== undefined;
    }
  }
  return false;
}

/** Runs one command in a build sandbox over `mnt`; a non-zero exit is a BuildFailure of `step`. */
async function run(env: StageEnv, st: StageState, step: string, mnt: string, argv: string[], as: string, binds?: { source: string; destination: string }[]): Promise<void> {
  const { ctx, buildID, signal } = env;
  const id = `b${buildID.replace(/-/g, "").slice(0, 12)}-${randomBytes(4).toString("hex")}`;
  let code: number | null;
  try {
    code = await runInBuild({
      runtime: ctx.runtime, id, rootfs: mnt, memoryMB: env.memoryMB,
      argv, user: as, env: st.envs, cwd: statInRootFollowing(mnt, st.workdir)?.isDirectory() ? st.workdir : "/", binds, timeoutMs: ctx.stepTimeoutMs, signal,
      onLine: (line) => ctx.log({ level: "info", message: line, step }),
    });
  } catch (err) {
    throw new BuildFailure(`step ${step} failed: ${(err as Error).message}`, step);
  }
  signal.throwIfAborted();
  if (code !== 0) throw new BuildFailure(`step ${step} failed: the command exited with ${code === null ? "a signal" : `code ${code}`}`, step);
}

/** Makes (or takes from the cache) the layer `key` over the stage's stack by running `script` as `as`. */
async function layer(env: StageEnv, st: StageState, step: string, script: string, as: string, binds?: { source: string; destination: string }[]): Promise<string> {
  const bash = statInRootFollowing(st.stack[0], "/bin/bash")?.isFile() ? "/bin/bash" : "/bin/sh";
  return env.ctx.cache.make(st.key, st.stack, async (mnt) => {
    try {
      await run(env, st, step, mnt, [bash, "-c", script], as, binds);
    } finally {
      // the mount point the runtime made for the files is not part of the layer (rmdir never follows a link)
      if (binds) {
        try {
          rmdirSync(join(mnt, COPY_MOUNT));
        } catch {
          // not made (the step failed before the runtime mounted it)
        }
      }
    }
  });
}

/** E2B's user phase over a pulled image: user `user`, once per image (a cached layer). */
export async function prepareImage(env: StageEnv, st: StageState): Promise<void> {
  st.key = chainKey(st.key, { prepare: PREPARE_SCRIPT });
  const cached = st.forced ? undefined : env.ctx.cache.get(st.key);
  env.ctx.log({ level: "info", message: `${cached ? "CACHED " : ""}adding user 'user' to the image where it lacks one`, step: "base" });
  st.stack.push(cached ?? (await env.ctx.cache.make(st.key, st.stack, (mnt) => run(env, st, "base", mnt, ["/bin/sh", "-c", PREPARE_SCRIPT], "0"))));
}

/** Runs `steps` over the stage; `label` names an earlier stage in step names and log lines (none for the last). */
export async function runSteps(env: StageEnv, st: StageState, steps: Step[], label?: string): Promise<void> {
  const { ctx, buildID, signal } = env;
  const n = steps.length;
  for (let i = 0; i < n; i++) {
    signal.throwIfAborted();
    const s = steps[i];
    const step = label ? `${label}:${i + 1}` : String(i + 1);
    const what = `[${label ? `${label} ` : ""}${i + 1}/${n}] ${s.type} ${s.args.filter(Boolean).join(" ")}${s.fromStage !== undefined ? " (from an earlier stage)" : ""}`.slice(0, 300);
    st.forced ||= !!s.force;
    // a COPY's layer is of the bytes stored (or of the stage copied from), not of the hash the client named
    const from = s.type === "COPY" && s.fromStage !== undefined ? await env.source(s.fromStage) : undefined;
    const digest = s.type === "COPY" && s.filesHash ? ctx.filesDigest(s.filesHash) : undefined;
    if (s.type === "COPY" && !digest && !from) {
      throw new BuildFailure(
        s.filesHash
          ? `step ${step} failed: COPY ${s.args[0]}: its files (hash ${s.filesHash}) were never uploaded, or were evicted to keep the team's storage quota; build again to upload them`
          : `step ${step} failed: COPY ${s.args[0]}: the Dockerfile API has no build context; build with the SDK's Template().fromDockerfile() to copy files`,
        step,
      );
    }
    st.key = chainKey(st.key, { type: s.type, args: s.args, filesHash: s.filesHash ?? null, digest: digest ?? null, ...(from ? { from: from.key } : {}), user: st.user, workdir: st.workdir, envs: st.envs, ...(st.forced ? { forced: buildID } : {}) });
    if (s.type === "ENV") {
      for (let j = 0; j < s.args.length; j += 2) st.envs[s.args[j]] = s.args[j + 1];
      ctx.log({ level: "info", message: what, step });
      continue;
    }
    const cached = st.forced ? undefined : ctx.cache.get(st.key);
    if (s.type === "USER" && !cached && userInStack(st.stack, s.args[0])) {
      // the user exists: nothing to change, no build sandbox and no layer
      ctx.log({ level: "info", message: what, step });
    } else if (cached) {
      st.stack.push(cached);
      ctx.log({ level: "info", message: `CACHED ${what} (layer ${st.key.slice(0, 12)})`, step });
    } else {
      ctx.log({ level: "info", message: what, step });
      let held: HeldFiles | undefined;
      try {
        if (s.type === "RUN") st.stack.push(await layer(env, st, step, s.args[0], s.args[1] || st.user));
        else if (s.type === "USER") st.stack.push(await layer(env, st, step, `id -u ${shq(s.args[0])} >/dev/null 2>&1 || useradd -m -s /bin/bash ${shq(s.args[0])}`, "root"));
        else if (s.type === "WORKDIR") {
          const dir = s.args[0].startsWith("/") ? s.args[0] : join(st.workdir, s.args[0]);
          st.stack.push(await layer(env, st, step, `[ -d ${shq(dir)} ] || { mkdir -p ${shq(dir)} && chown ${shq(st.user)} ${shq(dir)}; }`, "root"));
        } else {
          if (!from) {
            held = await ctx.holdFiles(s.filesHash!, digest!).catch((err: Error) => {
              throw new BuildFailure(`step ${step} failed: COPY ${s.args[0]}: ${err.message}`, step);
            });
            if (!held) throw new BuildFailure(`step ${step} failed: COPY ${s.args[0]}: its files (hash ${s.filesHash}) were evicted meanwhile; build again`, step);
          }
          const dest = s.args[1].startsWith("/") ? s.args[1] : join(st.workdir, s.args[1]) + (s.args[1].endsWith("/") ? "/" : "");
          const script = copyScript(s.args[0], dest, s.args[2] || st.user, s.args[3] ?? "", from ? "the stage copied from" : "the uploaded files");
          st.stack.push(await layer(env, st, step, script, "root", [{ source: from?.dir ?? held!.dir, destination: COPY_MOUNT }]));
        }
      } finally {
        held?.release();
      }
    }
    if (s.type === "USER") st.user = s.args[0];
    if (s.type === "WORKDIR") st.workdir = s.args[0].startsWith("/") ? s.args[0] : join(st.workdir, s.args[0]);
  }
}

import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { unmount } from "../host/mounts.js";
import { dockerStartCmd } from "./docker-vars.js";
import { STACK_SUFFIX, rootfsLayers, writeLayerStack } from "../host/overlay.js";
import { chainKey, inMergedStack, linkTree, mountStack, removeTree, type LayerCache } from "./layers.js";
import { lookupUser } from "./runner.js";
import type { BaseImage } from "./base-images.js";
import { BuildFailure } from "./build-failure.js";
import type { ExecutorContext } from "./build-context.js";
import { prepareImage, runSteps, userInStack, type StageEnv, type StageState } from "./stage-run.js";
import type { BuildSpec } from "./steps.js";


/** The state a build carries from step to step, and what a finished build sets on its template. */
export interface BuildOutcome {
  rootfs: string;
  user: string;
  workdir: string;
  envs: Record<string, string>;
  /** Docker's start command, when a Dockerfile's CMD/ENTRYPOINT made one with the image's. */
  startCmd?: string;
}

/**
 * Runs a build: each earlier stage of a multi-stage Dockerfile, then the build's own steps, as
 * layers over their bases, each step in its own build sandbox, and publishes the last stage's layers
 * as `<rootfsDir>/<key of its last step>.stack`. Layers and published stacks come from the cache
 * unless a step (or the build) is forced; every step logs what it did, and a failure names the
 * step. A pulled image's config is where a stage's steps start; a Dockerfile's CMD is combined
 * with the image's ENTRYPOINT as Docker does.
 */
export async function executeBuild(ctx: ExecutorContext, buildID: string, spec: BuildSpec, memoryMB: number, signal: AbortSignal): Promise<BuildOutcome> {
  const held: BaseImage[] = [];
  const mounts: string[] = [];
  const stages: StageState[] = [];
  const stageDir = join(ctx.buildsDir, buildID, "stages");
  const env: StageEnv = {
    ctx, buildID, memoryMB, signal,
    source: async (k) => {
      const st = stages[k];
      if (!st) throw new BuildFailure(`COPY --from names stage ${k}, which is not built before it`);
      if (st.stack.length === 1) return { dir: st.stack[0], key: st.key };
      const mnt = join(stageDir, String(k));
      if (!mounts.includes(mnt)) {
        mkdirSync(mnt, { recursive: true, mode: 0o700 });
        await mountStack(st.stack, mnt);
        mounts.push(mnt);
      }
      return { dir: mnt, key: st.key };
    },
  };
  /** A stage's starting state: over an earlier stage, or over its base (pulled if need be). */
  const begin = async (from: { fromImage?: string; fromTemplate?: string; fromStage?: number }, final: boolean): Promise<StageState> => {
    if (from.fromStage !== undefined) {
      const s = stages[from.fromStage];
      return { ...s, stack: [...s.stack], envs: { ...s.envs } };
    }
    const base = await ctx.baseOf({ ...from, force: spec.force, final }, signal);
    held.push(base);
    const image = base.image?.config;
    const st: StageState = {
      stack: rootfsLayers(base.rootfs), ...(base.image ? { pulled: chainKey("image", base.rootfs) } : {}), key: chainKey("base", { scope: ctx.scope, base: base.rootfs }), forced: spec.force, envs: { ...image?.env },
      user: image?.user ?? (final ? spec.initialUser : "root"), workdir: image?.workdir ?? (final ? spec.initialWorkdir : "/"),
    };
    if (base.image && final) await prepareImage(env, st);
    return st;
  };
  try {
    for (const [k, stage] of (spec.stages ?? []).entries()) {
      stages.push(await begin(stage, false));
      await runSteps(env, stages[k], stage.steps, stage.name ?? `stage ${k}`);
    }
    const st = await begin(spec, true);
    await runSteps(env, st, spec.steps);
    const startCmd = spec.dockerStart ? dockerStartCmd(spec.dockerStart, held.at(-1)?.image?.config) : undefined;
    const out = { ...(await finalize(ctx, st, signal)), ...(startCmd ? { startCmd } : {}) };
    for (const m of mounts.splice(0).reverse()) await unmount(m);
    await removeTree(join(ctx.buildsDir, buildID));
    return out;
  } finally {
    for (const m of mounts.reverse()) await unmount(m).catch(() => undefined);
    for (const b of held) b.image?.release();
  }
}

/**
 * Publishes the last stage's layers as the template's rootfs (or takes it from the cache) and
 * checks its default user. A pulled image at the bottom is first kept as a hard-linked copy of
 * its own, since the image cache may prune the image while templates built on it live on.
 */
async function finalize(ctx: ExecutorContext, st: StageState, signal: AbortSignal): Promise<BuildOutcome> {
  signal.throwIfAborted();
  const flat = join(ctx.rootfsDir, st.key);
  const out = flat + STACK_SUFFIX;
  const checkUser = (root: string) => {
    if (!lookupUser(root, st.user)) throw new Error(`the default user '${st.user}' does not exist in the image`);
  };
  let rootfs: string;
  try {
    mkdirSync(ctx.rootfsDir, { recursive: true, mode: 0o711 });
    if (existsSync(flat) || existsSync(out)) {
      // these layers were published before (or flattened into one tree by an earlier sandboxd)
      rootfs = existsSync(flat) ? flat : out;
      ctx.log({ level: "info", message: `CACHED finalize: the rootfs of these layers (${st.key.slice(0, 12)})`, step: "finalize" });
      // the key covers every USER step, and the stack was published only once its user was found
      if (rootfs === flat) checkUser(flat);
      else if (!userInStack(rootfsLayers(out), st.user)) throw new Error(`the default user '${st.user}' does not exist in the image`);
    } else if (st.stack.length === 1) {
      rootfs = st.stack[0];
      checkUser(rootfs);
    } else {
      ctx.log({ level: "info", message: `finalize: publishing ${st.stack.length - 1} layer(s) over the base`, step: "finalize" });
      const stack = [...st.stack];
      if (st.pulled) {
        const kept = join(ctx.rootfsDir, `${st.pulled}.image`);
        stack[0] = existsSync(kept) ? kept : await linkTree(stack[0], kept);
      }
      const publish = (merged: string) => {
        checkUser(merged);
        writeLayerStack(out, stack, merged);
        return out;
      };
      rootfs = await inMergedStack(stack, out, publish).catch((err: Error) => {
        // another build of the same layers finished first
        if (existsSync(out)) return out;
        throw err;
      });
    }
  } catch (err) {
    throw new BuildFailure(`finalize failed: ${(err as Error).message}`, "finalize");
  }
  return { rootfs, user: st.user, workdir: st.workdir, envs: st.envs };
}

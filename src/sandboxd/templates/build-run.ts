import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../log.js";
import { isMounted, unmount } from "../host/mounts.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Build, BuildLogEntry } from "../store/builds.js";
import type { Store } from "../store/store.js";
import type { ExecutorContext } from "./build-context.js";
import { BuildFailure } from "./build-failure.js";
import { executeBuild } from "./executor.js";
import type { TemplateFiles } from "./files.js";
import { removeTree } from "./layers.js";
import { DEFAULT_TAG } from "./names.js";
import type { BuildSpec } from "./steps.js";
import type { BaseFrom, BaseImage } from "./base-images.js";
import type { RegistryCredentials } from "./oci/credentials.js";

/** A build's stored definition: what it builds and the tags it gets when ready. */
export type StoredSpec = Partial<BuildSpec> & { tags?: string[] };

/** Log lines kept per build; later lines are dropped (with one note). */
const MAX_LOG_LINES = 20_000;
/** How many of the failed step's last lines go into `reason.logEntries`. */
const REASON_TAIL = 20;

/** What the build runner needs: the store, the executor's surroundings, and the envd version templates report. */
export interface BuildRunnerOptions {
  store: Store;
  log: Logger;
  /** The executor's surroundings; its runtime also sweeps what runs of a stopped process left. */
  executor: Omit<ExecutorContext, "log" | "scope" | "filesDigest" | "holdFiles" | "baseOf" | "runtime"> & { runtime: Pick<Runtime, "runOnce" | "sweepRuns"> };
  files: Pick<TemplateFiles, "digest" | "hold">;
  /** The build's base; `credentials` and `say` serve its pull. */
  baseOf(teamID: string, from: BaseFrom, credentials: RegistryCredentials | undefined, signal: AbortSignal, say: (message: string, level?: "info" | "warn") => void): Promise<BaseImage>;
  envdVersion: string;
  /** Called when a build ends, whatever its outcome (the image cache's sweep). */
  afterBuild?(): void;
}

/**
 * Runs builds in the background, one per template at a time (a newer build cancels the older),
 * moving each through building → ready | error in the store; a ready build becomes its
 * template's current one and gets its tags.
 */
export class BuildRunner {
  private readonly running = new Map<string, { teamID: string; buildID: string; abort: AbortController; done: Promise<void> }>();

  constructor(private readonly o: BuildRunnerOptions) {}

  /**
   * Starts a build that has its spec stored; cancels the template's build in progress. The
   * registry credentials live in memory for this build's pull only.
   */
  start(teamID: string, build: Build, spec: BuildSpec, credentials?: RegistryCredentials): void {
    const prev = this.running.get(build.templateID);
    prev?.abort.abort(new Error(`cancelled by the newer build ${build.id}`));
    const abort = new AbortController();
    const done = (prev?.done ?? Promise.resolve()).then(() => this.run(teamID, build, spec, credentials, abort.signal));
    this.running.set(build.templateID, { teamID, buildID: build.id, abort, done });
    void done.finally(() => {
      if (this.running.get(build.templateID)?.buildID === build.id) this.running.delete(build.templateID);
      this.o.afterBuild?.();
    });
  }

  /** How many of a team's templates have a build in progress. */
  active(teamID: string): number {
    return [...this.running.values()].filter((r) => r.teamID === teamID).length;
  }

  /** Cancels the template's build in progress and waits for it to stop. */
  async cancel(templateID: string, why: string): Promise<void> {
    const cur = this.running.get(templateID);
    if (!cur) return;
    cur.abort.abort(new Error(why));
    await cur.done;
  }

  private append(buildID: string, e: Omit<BuildLogEntry, "timestamp">, count: { n: number }): void {
    count.n++;
    if (count.n > MAX_LOG_LINES) {
      if (count.n === MAX_LOG_LINES + 1) this.o.store.builds.appendLog(buildID, { timestamp: new Date().toISOString(), level: "warn", message: `more than ${MAX_LOG_LINES} log lines: the rest is dropped` });
      return;
    }
    this.o.store.builds.appendLog(buildID, { ...e, message: e.message.slice(0, 4096), timestamp: new Date().toISOString() });
  }

  private async run(teamID: string, build: Build, spec: BuildSpec, credentials: RegistryCredentials | undefined, signal: AbortSignal): Promise<void> {
    const { store, log } = this.o;
    const count = { n: store.builds.logs(build.id, 0, MAX_LOG_LINES).length };
    const say = (e: Omit<BuildLogEntry, "timestamp">) => this.append(build.id, e, count);
    const set = (patch: Partial<Build>) => {
      const cur = store.builds.get(build.id);
      if (cur) store.builds.update({ ...cur, ...patch, updatedAt: new Date().toISOString() });
    };
    const t0 = Date.now();
    try {
      signal.throwIfAborted();
      set({ status: "building" });
      say({ level: "info", message: `Building template ${build.templateID}, build ${build.id}`, step: "base" });
      const out = await executeBuild(
        {
          ...this.o.executor, log: say, scope: teamID, filesDigest: (h) => this.o.files.digest(teamID, h),
          holdFiles: (h, d) => this.o.files.hold(teamID, h, d), baseOf: (s, sig) => this.o.baseOf(teamID, s, credentials, sig, (message, level) => say({ level: level ?? "info", message, step: "base" })),
        },
        build.id, spec, build.memoryMB, signal,
      );
      const tags = [...new Set([DEFAULT_TAG, ...((store.builds.get(build.id)?.spec as StoredSpec | null)?.tags ?? [])])];
      store.transaction(() => {
        const now = new Date().toISOString();
        set({ status: "ready", rootfs: out.rootfs, envdVersion: this.o.envdVersion, defaultUser: out.user, defaultWorkdir: out.workdir, startCmd: out.startCmd ?? spec.startCmd ?? null, readyCmd: spec.readyCmd ?? null, envs: out.envs, finishedAt: now });
        store.templates.setBuild(build.templateID, {
          rootfs: out.rootfs, buildID: build.id, envdVersion: this.o.envdVersion, defaultUser: out.user, defaultWorkdir: out.workdir,
          cpuCount: build.cpuCount, memoryMB: build.memoryMB, startCmd: out.startCmd ?? spec.startCmd ?? null, readyCmd: spec.readyCmd ?? null, envs: out.envs,
        });
        for (const tag of tags) store.builds.setTag(build.templateID, tag, build.id);
      });
      say({ level: "info", message: `Build finished in ${((Date.now() - t0) / 1000).toFixed(1)} s; tags: ${tags.join(", ")}`, step: "finalize" });
      log.info({ templateID: build.templateID, buildID: build.id, ms: Date.now() - t0 }, "template build ready");
    } catch (err) {
      const failure = err instanceof BuildFailure ? err : new BuildFailure(signal.aborted ? `build cancelled: ${(signal.reason as Error)?.message ?? "aborted"}` : `build failed: ${(err as Error).message}`);
      say({ level: "error", message: failure.message, ...(failure.step ? { step: failure.step } : {}) });
      const all = store.builds.logs(build.id, Math.max(0, count.n - 200), 200);
      const tail = all.filter((e) => !failure.step || e.step === failure.step).slice(-REASON_TAIL);
      set({ status: "error", reason: { message: failure.message, ...(failure.step ? { step: failure.step } : {}), logEntries: tail }, finishedAt: new Date().toISOString() });
      await removeTree(join(this.o.executor.buildsDir, build.id)).catch(() => undefined);
      log.warn({ templateID: build.templateID, buildID: build.id, step: failure.step, err: failure.message }, "template build failed");
    }
  }

  /**
   * Start-up: builds a stopped sandboxd left waiting or building fail (their reason says so),
   * and what their build sandboxes left (containers, mounts, half-made layers and uploads) is removed.
   */
  async recover(templatesDir: string, sweep: () => Promise<void>): Promise<void> {
    const { store, executor } = this.o;
    for (const b of store.builds.unfinished()) {
      if (b.status === "waiting" && b.spec && !(b.spec as StoredSpec).steps) continue; // still waiting for its steps
      store.builds.update({ ...b, status: "error", reason: { message: "the build was interrupted: sandboxd stopped while it ran; start a new build" }, finishedAt: new Date().toISOString(), updatedAt: new Date().toISOString() });
    }
    await executor.runtime.sweepRuns?.();
    await unmountBelow(templatesDir);
    // nothing builds yet: every build's scratch directory and every half-flattened rootfs is a leftover
    for (const id of existsSync(executor.buildsDir) ? readdirSync(executor.buildsDir) : []) await removeTree(join(executor.buildsDir, id)).catch(() => undefined);
    for (const name of existsSync(executor.rootfsDir) ? readdirSync(executor.rootfsDir) : []) {
      if (name.includes(".tmp-")) await removeTree(join(executor.rootfsDir, name)).catch(() => undefined);
    }
    await sweep();
  }

  /** Cancels every build in progress and waits for them. */
  async close(): Promise<void> {
    for (const r of this.running.values()) r.abort.abort(new Error("sandboxd is stopping"));
    await Promise.allSettled([...this.running.values()].map((r) => r.done));
    await this.o.executor.runtime.sweepRuns?.();
  }
}

/** Unmounts whatever is still mounted below `dir` (deepest first). */
export async function unmountBelow(dir: string): Promise<void> {
  const mounts = readFileSync("/proc/self/mountinfo", "utf8").split("\n").map((l) => l.split(" ")[4]?.replace(/\\040/g, " ")).filter((m): m is string => !!m && m.startsWith(dir + "/"));
  for (const m of mounts.sort().reverse()) if (isMounted(m)) await unmount(m);
}

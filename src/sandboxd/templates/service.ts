import { join } from "node:path";
import type { Readable } from "node:stream";
import type { Logger } from "../log.js";
import type { Runtime } from "../runtime/runtime.js";
import { Conflict, Forbidden, invalid, Invalid, LimitExceeded, NotFound } from "../errors.js";
import type { Build } from "../store/builds.js";
import { installSecret, randomId } from "../store/seed.js";
import type { Store } from "../store/store.js";
import type { Template } from "../store/templates.js";
import { BuildRunner, type StoredSpec } from "./build-run.js";
import { TemplateFiles } from "./files.js";
import { LayerCache, removeTree } from "./layers.js";
import { resolveBase } from "./base-images.js";
import type { DockerfileTemplate, NamedTemplate, TagChange, TemplateUpdate } from "./inputs.js";
import type { RegistryCredentials } from "./oci/credentials.js";
import { imageSource } from "./oci/images.js";
import type { RegistrySettings } from "./oci/settings.js";
import type { BuildSpec } from "./steps.js";
import type { TemplateResources } from "./resources.js";
import { uploadLimits, type UploadLimits } from "./limits.js";
import { legacyView, logLine, logView, namesOf, templateView, templateWithBuildsView } from "./views.js";

type Body = Record<string, unknown>;

/** Options of the template service. */
export interface TemplateServiceOptions {
  store: Store;
  log: Logger;
  dataDir: string;
  /** The base rootfs `e2bdev/base` and `debian:bookworm` resolve to. */
  baseRootfs: string;
  envdVersion: string;
  /** Where build steps run (the run-once verb), and what sweeps the runs a stopped sandboxd left. */
  runtime: Pick<Runtime, "runOnce" | "sweepRuns">;
  /** Why a new template may not be called `alias` in the team's names (a snapshot has it), or undefined. */
  nameClash?(teamID: string, alias: string): string | undefined;
  /** What holds a template in words (sandboxes running or paused from it, snapshots of them), or undefined: a template held cannot be deleted. */
  holders(templateID: string): string | undefined;
  stepTimeoutMs?: number;
  /** Bounds of COPY uploads and their unpacking (default: from the environment, see limits.ts). */
  uploadLimits?: UploadLimits;
  /** How base images are pulled; undefined: builds use only the base rootfs and templates. */
  registry?: RegistrySettings;
}

/** Template operations of the control API, for a team. */
export type TemplateService = ReturnType<typeof createTemplateService>;

/** Templates of one team that may build at once (each build runs its steps one by one). */
const MAX_CONCURRENT_BUILDS = 4;

/** Creates the service; call recover() before serving. */
export function createTemplateService(o: TemplateServiceOptions) {
  const { store, log } = o;
  const dir = join(o.dataDir, "templates");
  const cache = new LayerCache(dir);
  const images = o.registry ? imageSource(join(dir, "images"), o.registry, o.dataDir, log) : undefined;
  const files = new TemplateFiles(join(dir, "files"), () => installSecret(store), o.uploadLimits ?? uploadLimits(process.env));
  const runner = new BuildRunner({
    store, log, envdVersion: o.envdVersion,
    executor: {
      cache, buildsDir: join(dir, "builds"), rootfsDir: join(dir, "rootfs"), runtime: o.runtime,
      stepTimeoutMs: o.stepTimeoutMs ?? 30 * 60_000,
    },
    files,
    baseOf: (teamID, spec, credentials, signal, say) => resolveBase({ store, teamID, baseRootfs: o.baseRootfs, images, credentials, signal, say }, spec),
    afterBuild: () => void images?.sweep(),
  });

  /** The team's template by ID or alias; NotFound unknown, Forbidden another team's. */
  const owned = (teamID: string, ref: string): Template => {
    const t = store.templates.get(ref) ?? store.templates.byAlias(ref.toLowerCase());
    if (!t) throw new NotFound(`Template '${ref}' not found`);
    if (t.teamID !== teamID) throw new Forbidden(`You don't have access to template '${ref}'`);
    return t;
  };
  const buildOf = (t: Template, buildID: string): Build => {
    const b = store.builds.get(buildID);
    if (!b || b.templateID !== t.id) throw new Invalid(`Build '${buildID}' not found`);
    return b;
  };

  /** Finds or makes the template called `alias` and adds a waiting build to it. */
  const request = (teamID: string, alias: string | undefined, res: TemplateResources, spec: StoredSpec): { t: Template; b: Build } =>
    store.transaction(() => {
      const now = new Date().toISOString();
      let t = alias ? store.templates.byAlias(alias) : undefined;
      if (t && t.teamID !== teamID) throw new Conflict(`the name '${alias}' is taken by another team's template`);
      if (t && store.builds.count(t.id) === 0 && t.rootfs) throw new Conflict(`template '${alias}' is built in and cannot be rebuilt`);
      const clash = !t && alias ? o.nameClash?.(teamID, alias) : undefined;
      if (clash) throw new Conflict(clash);
      if (!t) {
        t = {
          id: randomId(20), alias: alias ?? null, teamID, cpuCount: res.cpuCount, memoryMB: res.memoryMB, diskSizeMB: res.diskSizeMB, envdVersion: o.envdVersion,
          defaultUser: null, defaultWorkdir: null, rootfs: "", buildID: "", createdAt: now, updatedAt: now, spawnCount: 0, lastSpawnedAt: null,
        };
        store.templates.insert(t);
      } else if (t.diskSizeMB !== res.diskSizeMB) {
        // the newest build's minFreeDiskMb decides the disk of sandboxes made from now on
        store.templates.setDiskSize(t.id, res.diskSizeMB);
      }
      const b: Build = {
        id: crypto.randomUUID(), templateID: t.id, status: "waiting", reason: null, spec, cpuCount: res.cpuCount, memoryMB: res.memoryMB, rootfs: null,
        envdVersion: null, defaultUser: null, defaultWorkdir: null, startCmd: null, readyCmd: null, envs: null, createdAt: now, updatedAt: now, finishedAt: null,
      };
      store.builds.insert(b);
      return { t, b };
    });

  /** LimitExceeded when the team already builds as many templates as it may. */
  const capacity = (teamID: string) => {
    if (runner.active(teamID) >= MAX_CONCURRENT_BUILDS) {
      throw new LimitExceeded(`you have reached the maximum number of concurrent template builds (${MAX_CONCURRENT_BUILDS}); wait for one to finish`);
    }
  };

  const start = (teamID: string, b: Build, spec: BuildSpec, tags: string[], credentials?: RegistryCredentials) => {
    store.builds.update({ ...b, spec: { ...spec, tags }, updatedAt: new Date().toISOString() });
    runner.start(teamID, store.builds.get(b.id)!, spec, credentials);
  };

  return {
    list: (teamID: string): Body[] => store.templates.listByTeam(teamID).map((t) => templateView(store, t)),

    /** GET /templates/{id}: the template with its builds (NotFound unknown, Forbidden another team's). */
    get: (teamID: string, ref: string): Body => templateWithBuildsView(store, owned(teamID, ref)),

    /** v1 POST /templates: a Dockerfile, built here at once (there is no image to push). */
    createV1(teamID: string, input: DockerfileTemplate): Body {
      capacity(teamID);
      const { t, b: build } = request(teamID, input.alias, input.resources, {});
      start(teamID, build, input.spec, []);
      return legacyView(store, store.templates.get(t.id)!, build);
    },

    /** POST /v3/templates: a name (and tags) for a build whose steps come next. */
    createV3(teamID: string, input: NamedTemplate): Body {
      const { name, tags } = input;
      const { t, b: build } = request(teamID, name, input.resources, { tags });
      return { templateID: t.id, buildID: build.id, public: t.public === true, names: [name], tags, aliases: [name] };
    },

    /** POST /v2/templates/{id}/builds/{buildID}: the steps; the build runs in the background. */
    startBuild(teamID: string, templateID: string, buildID: string, spec: BuildSpec, credentials?: RegistryCredentials): void {
      const t = owned(teamID, templateID);
      const b = buildOf(t, buildID);
      if (b.status !== "waiting" || (b.spec as StoredSpec | null)?.steps) throw invalid("build is not in waiting state");
      capacity(teamID);
      start(teamID, b, spec, (b.spec as StoredSpec | null)?.tags ?? [], credentials);
    },

    /** GET /templates/{id}/builds/{buildID}/status. */
    status(teamID: string, templateID: string, buildID: string, q: URLSearchParams): Body {
      const b = buildOf(owned(teamID, templateID), buildID);
      const offset = Math.max(0, Number.parseInt(q.get("logsOffset") ?? "0", 10) || 0);
      const limit = Math.min(100, Math.max(1, Number.parseInt(q.get("limit") ?? "100", 10) || 100));
      const level = q.get("level");
      const order = ["debug", "info", "warn", "error"];
      let entries = store.builds.logs(b.id, offset, limit);
      if (level && order.includes(level)) entries = entries.filter((e) => order.indexOf(e.level) >= order.indexOf(level));
      return {
        templateID: b.templateID, buildID: b.id, status: b.status, logs: entries.map(logLine), logEntries: entries.map(logView),
        ...(b.reason ? { reason: b.reason } : {}),
      };
    },

    /** GET /templates/{id}/builds/{buildID}/logs: `cursor` (ms since the epoch), `direction`, `limit`, `level` as E2B's. */
    logs(teamID: string, templateID: string, buildID: string, q: URLSearchParams): Body {
      const b = buildOf(owned(teamID, templateID), buildID);
      const limit = Math.min(100, Math.max(1, Number.parseInt(q.get("limit") ?? "100", 10) || 100));
      const direction = q.get("direction") ?? "forward";
      if (direction !== "forward" && direction !== "backward") throw invalid(`"direction" must be forward or backward`);
      const cursor = q.has("cursor") ? Number(q.get("cursor")) : undefined;
      if (cursor !== undefined && !Number.isFinite(cursor)) throw invalid(`"cursor" must be a timestamp in milliseconds`);
      const order = ["debug", "info", "warn", "error"];
      const level = q.get("level");
      let all = store.builds.logs(b.id, 0, 1_000_000).filter((e) => !level || order.indexOf(e.level) >= order.indexOf(level));
      if (cursor !== undefined) all = all.filter((e) => (direction === "forward" ? Date.parse(e.timestamp) >= cursor : Date.parse(e.timestamp) <= cursor));
      return { logs: (direction === "forward" ? all.slice(0, limit) : all.reverse().slice(0, limit)).map(logView) };
    },

    /** GET /templates/{id}/files/{hash}: whether the files are here, else where to PUT them. */
    fileLink(teamID: string, templateID: string, hash: string, host: string): Body {
      owned(teamID, templateID);
      if (!/^[A-Za-z0-9_-]{1,128}$/.test(hash)) throw invalid("the files hash must be 1-128 of [A-Za-z0-9_-]");
      if (files.has(teamID, hash)) return { present: true };
      files.checkRoom(teamID);
      return { present: false, url: `https://${host}/templates/${templateID}/files/${hash}?token=${encodeURIComponent(files.uploadToken(teamID, hash))}` };
    },

    /** PUT on an upload URL (authenticated by its token, not by an API key). */
    async upload(body: Readable, contentLength: string | undefined, hash: string, token: string): Promise<void> {
      if (!/^[A-Za-z0-9_-]{1,128}$/.test(hash)) throw invalid("the files hash must be 1-128 of [A-Za-z0-9_-]");
      await files.receive(body, contentLength, files.checkToken(token, hash), hash);
    },

    /** DELETE /templates/{id}: refused for the built-in base and while sandboxes run from it. */
    async remove(teamID: string, templateID: string): Promise<void> {
      const t = owned(teamID, templateID);
      if (store.builds.count(t.id) === 0 && t.rootfs) throw new Invalid(`template '${t.alias ?? t.id}' is built in and cannot be deleted`);
      const held = o.holders(t.id);
      if (held) throw new Conflict(`template '${t.alias ?? t.id}' is in use by ${held}; delete the template once they are gone`);
      await runner.cancel(t.id, "the template was deleted");
      const builds = store.builds.listByTemplate(t.id);
      store.transaction(() => {
        store.builds.deleteTemplate(t.id);
        store.templates.delete(t.id);
      });
      for (const b of builds) await removeTree(join(dir, "builds", b.id)).catch((err: Error) => log.warn({ buildID: b.id, err: err.message }, "removing a build's files failed"));
    },

    /**
     * PATCH /v2/templates/{id} (`TemplateUpdateRequest`): publishes or unpublishes the team's
     * template (a public one serves every team's creates and builds). Another team's template is
     * NotFound, as an unknown one: the update must not tell a template exists.
     */
    update(teamID: string, ref: string, change: TemplateUpdate): Body {
      const t = store.templates.get(ref) ?? store.templates.byAlias(ref.toLowerCase());
      if (!t || t.teamID !== teamID) throw new NotFound(`Template '${ref}' not found`);
      if (change.public !== undefined && change.public !== (t.public === true)) {
        if (store.builds.count(t.id) === 0 && t.rootfs) throw invalid(`template '${t.alias ?? t.id}' is built in; its visibility cannot change`);
        store.templates.setPublic(t.id, change.public);
      }
      return { names: namesOf(store, t) };
    },

    /** GET /templates/{id}/tags. */
    tags(teamID: string, templateID: string): Body[] {
      const t = owned(teamID, templateID);
      return store.builds.tags(t.id).map((x) => ({ tag: x.tag, buildID: x.buildID, createdAt: store.builds.get(x.buildID)?.finishedAt ?? t.createdAt }));
    },

    /** POST /templates/tags: points tags at the build `target` ("name:tag") names. */
    assignTags(teamID: string, { name, tag, tags }: TagChange): Body {
      const t = owned(teamID, name);
      const target = store.builds.tags(t.id).find((x) => x.tag === (tag ?? "default"));
      if (!target) throw new NotFound(`tag '${tag ?? "default"}' does not exist for template '${name}'`);
      for (const x of tags) store.builds.setTag(t.id, x, target.buildID);
      return { buildID: target.buildID, tags };
    },

    /** DELETE /templates/tags. */
    removeTags(teamID: string, { name, tags }: TagChange): void {
      const t = owned(teamID, name);
      for (const x of tags) if (!store.builds.deleteTag(t.id, x)) throw new NotFound(`tag '${x}' does not exist for template '${name}'`);
    },

    recover: () =>
      runner.recover(dir, async () => {
        await cache.sweep();
        files.sweep();
        await images?.sweep();
      }),
    close: () => runner.close(),
  };
}

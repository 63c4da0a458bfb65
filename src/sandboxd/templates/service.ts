import { createHash } from "node:crypto";
import { join, resolve } from "node:path";
import type { Logger } from "../log.js";
import { invalid, objectBody, optString, optStringList } from "../api/validate.js";
import type { AnyRequest } from "../proxy/errors.js";
import { ApiError } from "../sandboxes/errors.js";
import type { Build } from "../store/builds.js";
import { installSecret, randomId } from "../store/seed.js";
import type { Store } from "../store/store.js";
import type { Template } from "../store/templates.js";
import { BuildRunner, type StoredSpec } from "./build-run.js";
import { DockerfileError, parseDockerfile } from "./dockerfile.js";
import { TemplateFiles } from "./files.js";
import { LayerCache, removeTree } from "./layers.js";
import { checkTags, parseName } from "./names.js";
import { resolveBase } from "./base-images.js";
import { parseRegistryCredentials, type RegistryCredentials } from "./oci/credentials.js";
import { imageSource } from "./oci/images.js";
import type { RegistrySettings } from "./oci/settings.js";
import { parseBuildStart, type BuildSpec } from "./steps.js";
import { resources, type TemplateResources } from "./resources.js";
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
  tiniPath?: string;
  /** How many live sandboxes run from a template (a template in use cannot be deleted). */
  liveSandboxes(templateID: string): number;
  stepTimeoutMs?: number;
  /** Bounds of COPY uploads and their unpacking (default: from the environment, see limits.ts). */
  uploadLimits?: UploadLimits;
  /** How base images are pulled; undefined: builds use only the base rootfs and templates. */
  registry?: RegistrySettings;
}

/** Template operations of the control API, for a team. */
export type TemplateService = ReturnType<typeof createTemplateService>;

/**
 * The cgroup parent of a data dir's build sandboxes: named by the data dir, so that a restart
 * after a crash finds (and removes) what the last run left.
 */
export function buildCgroupParent(dataDir: string): string {
  return `sandboxd-build-${createHash("sha256").update(resolve(dataDir)).digest("hex").slice(0, 10)}`;
}

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
      cache, buildsDir: join(dir, "builds"), rootfsDir: join(dir, "rootfs"), runcRoot: join(o.dataDir, "runc-build"), tiniPath: o.tiniPath ?? "/usr/bin/tini-static",
      cgroupParent: buildCgroupParent(o.dataDir), stepTimeoutMs: o.stepTimeoutMs ?? 30 * 60_000,
    },
    files,
    baseOf: (teamID, spec, credentials, signal, say) => resolveBase({ store, teamID, baseRootfs: o.baseRootfs, images, credentials, signal, say }, spec),
    afterBuild: () => void images?.sweep(),
  });

  /** The team's template by ID or alias; 404 unknown, 403 another team's. */
  const owned = (teamID: string, ref: string): Template => {
    const t = store.templates.get(ref) ?? store.templates.byAlias(ref.toLowerCase());
    if (!t) throw new ApiError(404, `Template '${ref}' not found`);
    if (t.teamID !== teamID) throw new ApiError(403, `You don't have access to template '${ref}'`);
    return t;
  };
  const buildOf = (t: Template, buildID: string): Build => {
    const b = store.builds.get(buildID);
    if (!b || b.templateID !== t.id) throw new ApiError(400, `Build '${buildID}' not found`);
    return b;
  };

  /** Finds or makes the template called `alias` and adds a waiting build to it. */
  const request = (teamID: string, alias: string | undefined, res: TemplateResources, spec: StoredSpec): { t: Template; b: Build } =>
    store.transaction(() => {
      const now = new Date().toISOString();
      let t = alias ? store.templates.byAlias(alias) : undefined;
      if (t && t.teamID !== teamID) throw new ApiError(409, `the name '${alias}' is taken by another team's template`);
      if (t && store.builds.count(t.id) === 0 && t.rootfs) throw new ApiError(409, `template '${alias}' is built in and cannot be rebuilt`);
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

  /** 429 when the team already builds as many templates as it may. */
  const capacity = (teamID: string) => {
    if (runner.active(teamID) >= MAX_CONCURRENT_BUILDS) {
      throw new ApiError(429, `you have reached the maximum number of concurrent template builds (${MAX_CONCURRENT_BUILDS}); wait for one to finish`);
    }
  };

  const start = (teamID: string, b: Build, spec: BuildSpec, tags: string[], credentials?: RegistryCredentials) => {
    store.builds.update({ ...b, spec: { ...spec, tags }, updatedAt: new Date().toISOString() });
    runner.start(teamID, store.builds.get(b.id)!, spec, credentials);
  };

  return {
    list: (teamID: string): Body[] => store.templates.listByTeam(teamID).map((t) => templateView(store, t)),

    /** GET /templates/{id}: the template with its builds (404 unknown, 403 another team's). */
    get: (teamID: string, ref: string): Body => templateWithBuildsView(store, owned(teamID, ref)),

    /** v1 POST /templates: a Dockerfile, built here at once (there is no image to push). */
    createV1(teamID: string, body: unknown): Body {
      const b = objectBody(body, false);
      const dockerfile = optString(b, "dockerfile");
      if (!dockerfile) throw invalid(`field "dockerfile" is required`);
      const bodyTeam = optString(b, "teamID");
      if (bodyTeam && bodyTeam !== teamID) throw new ApiError(403, `You don't have access to team '${bodyTeam}'`);
      const alias = optString(b, "alias") ? parseName(optString(b, "alias")!).name : undefined;
      const res = resources(b);
      let parsed: ReturnType<typeof parseDockerfile>;
      try {
        parsed = parseDockerfile(dockerfile);
      } catch (err) {
        if (err instanceof DockerfileError) throw invalid(`invalid Dockerfile: ${err.message}`);
        throw err;
      }
      const own = optString(b, "startCmd");
      const spec: BuildSpec = { ...parsed, startCmd: own || parsed.startCmd, readyCmd: optString(b, "readyCmd") || parsed.readyCmd, force: false, ...(own ? { dockerStart: undefined } : {}) };
      capacity(teamID);
      const { t, b: build } = request(teamID, alias, res, {});
      start(teamID, build, spec, []);
      return legacyView(store, store.templates.get(t.id)!, build);
    },

    /** POST /v3/templates: a name (and tags) for a build whose steps come next. */
    createV3(teamID: string, body: unknown): Body {
      const b = objectBody(body, false);
      const raw = optString(b, "name") ?? optString(b, "alias");
      if (!raw) throw invalid("Name is required");
      const { name, tag } = parseName(raw);
      const tags = checkTags([...(tag ? [tag] : []), ...(optStringList(b, "tags", "tags") ?? [])]);
      const { t, b: build } = request(teamID, name, resources(b), { tags });
      return { templateID: t.id, buildID: build.id, public: t.public === true, names: [name], tags, aliases: [name] };
    },

    /** POST /v2/templates/{id}/builds/{buildID}: the steps; the build runs in the background. */
    startBuild(teamID: string, templateID: string, buildID: string, body: unknown): void {
      const t = owned(teamID, templateID);
      const b = buildOf(t, buildID);
      if (b.status !== "waiting" || (b.spec as StoredSpec | null)?.steps) throw invalid("build is not in waiting state");
      const spec = parseBuildStart(body);
      const credentials = parseRegistryCredentials(body);
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
    async upload(req: AnyRequest, hash: string, token: string): Promise<void> {
      if (!/^[A-Za-z0-9_-]{1,128}$/.test(hash)) throw invalid("the files hash must be 1-128 of [A-Za-z0-9_-]");
      await files.receive(req, files.checkToken(token, hash), hash);
    },

    /** DELETE /templates/{id}: refused for the built-in base and while sandboxes run from it. */
    async remove(teamID: string, templateID: string): Promise<void> {
      const t = owned(teamID, templateID);
      if (store.builds.count(t.id) === 0 && t.rootfs) throw new ApiError(400, `template '${t.alias ?? t.id}' is built in and cannot be deleted`);
      const live = o.liveSandboxes(t.id);
      if (live > 0) throw new ApiError(409, `template '${t.alias ?? t.id}' has ${live} running sandbox(es); kill them first`);
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
     * 404, as an unknown one: the update must not tell a template exists.
     */
    update(teamID: string, ref: string, body: unknown): Body {
      const b = objectBody(body, true);
      const unknown = Object.keys(b).filter((k) => k !== "public");
      if (unknown.length > 0) throw invalid(`unsupported field(s) ${unknown.map((k) => JSON.stringify(k)).join(", ")}: only "public" can be updated`);
      if (b.public !== undefined && typeof b.public !== "boolean") throw invalid(`field "public" must be a boolean, got ${JSON.stringify(b.public)?.slice(0, 40) ?? typeof b.public}`);
      const t = store.templates.get(ref) ?? store.templates.byAlias(ref.toLowerCase());
      if (!t || t.teamID !== teamID) throw new ApiError(404, `Template '${ref}' not found`);
      if (typeof b.public === "boolean" && b.public !== (t.public === true)) {
        if (store.builds.count(t.id) === 0 && t.rootfs) throw invalid(`template '${t.alias ?? t.id}' is built in; its visibility cannot change`);
        store.templates.setPublic(t.id, b.public);
      }
      return { names: namesOf(store, t) };
    },

    /** GET /templates/{id}/tags. */
    tags(teamID: string, templateID: string): Body[] {
      const t = owned(teamID, templateID);
      return store.builds.tags(t.id).map((x) => ({ tag: x.tag, buildID: x.buildID, createdAt: store.builds.get(x.buildID)?.finishedAt ?? t.createdAt }));
    },

    /** POST /templates/tags: points tags at the build `target` ("name:tag") names. */
    assignTags(teamID: string, body: unknown): Body {
      const b = objectBody(body, false);
      const { name, tag } = parseName(optString(b, "target") ?? "");
      const tags = checkTags(optStringList(b, "tags", "tags") ?? []);
      if (tags.length === 0) throw invalid("at least one tag is required");
      const t = owned(teamID, name);
      const target = store.builds.tags(t.id).find((x) => x.tag === (tag ?? "default"));
      if (!target) throw new ApiError(404, `tag '${tag ?? "default"}' does not exist for template '${name}'`);
      for (const x of tags) store.builds.setTag(t.id, x, target.buildID);
      return { buildID: target.buildID, tags };
    },

    /** DELETE /templates/tags. */
    removeTags(teamID: string, body: unknown): void {
      const b = objectBody(body, false);
      const { name } = parseName(optString(b, "name") ?? "");
      const tags = checkTags(optStringList(b, "tags", "tags") ?? []);
      const t = owned(teamID, name);
      for (const x of tags) if (!store.builds.deleteTag(t.id, x)) throw new ApiError(404, `tag '${x}' does not exist for template '${name}'`);
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

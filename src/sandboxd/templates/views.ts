import { createHash } from "node:crypto";
import type { Build, BuildLogEntry } from "../store/builds.js";
import type { Store } from "../store/store.js";
import type { Template } from "../store/templates.js";

type Body = Record<string, unknown>;

/** A stable UUID for a team, standing in for E2B's user that created a template (sandboxd has no users). */
export function teamUserId(teamID: string): string {
  const h = createHash("sha256").update(`team-user:${teamID}`).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The names a template is listed under: "<team>/<alias>" as E2B's namespaced names. */
export function namesOf(store: Store, t: Template): string[] {
  if (!t.alias) return [];
  const team = store.teams.get(t.teamID)?.name ?? t.teamID;
  return [`${team}/${t.alias}`];
}

/** The `Template` shape of GET /templates and /v2/templates. */
export function templateView(store: Store, t: Template): Body {
  const latest = store.builds.latest(t.id);
  const builds = store.builds.count(t.id);
  const team = store.teams.get(t.teamID);
  return {
    templateID: t.id,
    buildID: t.buildID,
    cpuCount: t.cpuCount,
    memoryMB: t.memoryMB,
    diskSizeMB: t.diskSizeMB,
    public: t.public === true,
    aliases: t.alias ? [t.alias] : [],
    names: namesOf(store, t),
    createdAt: t.createdAt,
    updatedAt: t.updatedAt,
    createdBy: { id: teamUserId(t.teamID), email: `${team?.name ?? t.teamID}@sandboxd.local` },
    lastSpawnedAt: t.lastSpawnedAt,
    spawnCount: t.spawnCount,
    // the built-in base template was made once at install, not by a build of the API
    buildCount: builds > 0 ? builds : 1,
    envdVersion: t.envdVersion,
    buildStatus: latest?.status ?? "ready",
  };
}

/** The `TemplateLegacy` answer of v1 POST /templates. */
export function legacyView(store: Store, t: Template, build: Build): Body {
  return { ...templateView(store, t), buildID: build.id };
}

/** One log entry as E2B's `BuildLogEntry`. */
export const logView = (e: BuildLogEntry): Body => ({ timestamp: e.timestamp, level: e.level, message: e.message, ...(e.step ? { step: e.step } : {}) });

/** The legacy plain-text form of a log entry (`logs[]`). */
export const logLine = (e: BuildLogEntry): string => `[${e.timestamp}] ${e.level}: ${e.message}`;

/**
 * E2B's `TemplateWithBuilds` (GET /templates/{id}): the template and its builds, newest first,
 * whatever their status (so a failed build's logs can be found).
 */
export function templateWithBuildsView(store: Store, t: Template): Body {
  const { buildID: _b, buildStatus: _s, cpuCount: _c, memoryMB: _m, diskSizeMB: _d, buildCount: _n, envdVersion: _e, createdBy: _by, ...rest } = templateView(store, t);
  const builds = store.builds.listByTemplate(t.id).reverse();
  return {
    ...rest,
    builds: builds.map((b) => ({
      buildID: b.id, status: b.status, createdAt: b.createdAt, updatedAt: b.updatedAt, ...(b.finishedAt ? { finishedAt: b.finishedAt } : {}),
      cpuCount: b.cpuCount, memoryMB: b.memoryMB, diskSizeMB: t.diskSizeMB, ...(b.envdVersion ? { envdVersion: b.envdVersion } : {}),
    })),
  };
}

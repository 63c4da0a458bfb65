import type { DatabaseSync } from "node:sqlite";

/** Where a build is: waiting for its steps, building, or finished (ready or error). */
export type BuildStatus = "waiting" | "building" | "ready" | "error";

/** Why a build failed: a message, the step it failed in and that step's last log lines. */
export interface BuildReason {
  message: string;
  step?: string;
  logEntries?: BuildLogEntry[];
}

/** One build of a template. */
export interface Build {
  id: string;
  templateID: string;
  status: BuildStatus;
  reason: BuildReason | null;
  /** The build definition (steps, from, start/ready commands) once it was started. */
  spec: unknown;
  cpuCount: number;
  memoryMB: number;
  /** What a ready build produced. */
  rootfs: string | null;
  envdVersion: string | null;
  defaultUser: string | null;
  defaultWorkdir: string | null;
  startCmd: string | null;
  readyCmd: string | null;
  envs: Record<string, string> | null;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
}

/** One line of a build's log. */
export interface BuildLogEntry {
  timestamp: string;
  level: "debug" | "info" | "warn" | "error";
  message: string;
  step?: string;
}

/** The template_builds, build_logs and template_tags tables. */
export interface Builds {
  get(id: string): Build | undefined;
  insert(b: Build): void;
  update(b: Build): void;
  listByTemplate(templateID: string): Build[];
  /** The newest build of a template, whatever its status. */
  latest(templateID: string): Build | undefined;
  count(templateID: string): number;
  /** Builds left waiting or building (by a sandboxd that stopped). */
  unfinished(): Build[];
  appendLog(buildID: string, e: BuildLogEntry): void;
  /** Log entries from `offset` on, at most `limit`. */
  logs(buildID: string, offset: number, limit: number): BuildLogEntry[];
  /** Points a tag of a template at a build. */
  setTag(templateID: string, tag: string, buildID: string): void;
  deleteTag(templateID: string, tag: string): boolean;
  tags(templateID: string): { tag: string; buildID: string }[];
  /** Removes every build, log and tag of a template. */
  deleteTemplate(templateID: string): void;
}

interface Row {
  id: string;
  template_id: string;
  status: BuildStatus;
  reason: string | null;
  spec: string | null;
  cpu_count: number;
  memory_mb: number;
  rootfs: string | null;
  envd_version: string | null;
  default_user: string | null;
  default_workdir: string | null;
  start_cmd: string | null;
  ready_cmd: string | null;
  envs: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

function fromRow(r: Row): Build {
  return {
    id: r.id, templateID: r.template_id, status: r.status, reason: r.reason ? (JSON.parse(r.reason) as BuildReason) : null,
    spec: r.spec ? JSON.parse(r.spec) : null, cpuCount: Number(r.cpu_count), memoryMB: Number(r.memory_mb), rootfs: r.rootfs,
    envdVersion: r.envd_version, defaultUser: r.default_user, defaultWorkdir: r.default_workdir, startCmd: r.start_cmd, readyCmd: r.ready_cmd, envs: r.envs ? (JSON.parse(r.envs) as Record<string, string>) : null,
    createdAt: r.created_at, updatedAt: r.updated_at, finishedAt: r.finished_at,
  };
}

/** The row's columns after the ID, in table order. */
function columns(b: Build): (string | number | null)[] {
  return [
    b.templateID, b.status, b.reason ? JSON.stringify(b.reason) : null, b.spec === null || b.spec === undefined ? null : JSON.stringify(b.spec),
    b.cpuCount, b.memoryMB, b.rootfs, b.envdVersion, b.defaultUser, b.defaultWorkdir, b.startCmd, b.readyCmd, b.envs ? JSON.stringify(b.envs) : null, b.createdAt, b.updatedAt, b.finishedAt,
  ];
}

const COLS = "template_id, status, reason, spec, cpu_count, memory_mb, rootfs, envd_version, default_user, default_workdir, start_cmd, ready_cmd, envs, created_at, updated_at, finished_at";

/** The build tables. */
export function buildsTable(db: DatabaseSync): Builds {
  const get = db.prepare("SELECT * FROM template_builds WHERE id = ?");
  const insert = db.prepare(`INSERT INTO template_builds (id, ${COLS}) VALUES (?${", ?".repeat(16)})`);
  const update = db.prepare(`UPDATE template_builds SET (${COLS}) = (?${", ?".repeat(15)}) WHERE id = ?`);
  const list = db.prepare("SELECT * FROM template_builds WHERE template_id = ? ORDER BY created_at, rowid");
  const latest = db.prepare("SELECT * FROM template_builds WHERE template_id = ? ORDER BY created_at DESC, rowid DESC LIMIT 1");
  const count = db.prepare("SELECT COUNT(*) AS n FROM template_builds WHERE template_id = ?");
  const unfinished = db.prepare("SELECT * FROM template_builds WHERE status IN ('waiting', 'building')");
  const append = db.prepare(`INSERT INTO build_logs (build_id, seq, timestamp, level, message, step)
    VALUES (?, (SELECT COALESCE(MAX(seq), -1) + 1 FROM build_logs WHERE build_id = ?), ?, ?, ?, ?)`);
  const logs = db.prepare("SELECT * FROM build_logs WHERE build_id = ? AND seq >= ? ORDER BY seq LIMIT ?");
  const setTag = db.prepare("INSERT INTO template_tags (template_id, tag, build_id) VALUES (?, ?, ?) ON CONFLICT (template_id, tag) DO UPDATE SET build_id = excluded.build_id");
  const deleteTag = db.prepare("DELETE FROM template_tags WHERE template_id = ? AND tag = ?");
  const tags = db.prepare("SELECT tag, build_id FROM template_tags WHERE template_id = ? ORDER BY tag");
  const delLogs = db.prepare("DELETE FROM build_logs WHERE build_id IN (SELECT id FROM template_builds WHERE template_id = ?)");
  const delBuilds = db.prepare("DELETE FROM template_builds WHERE template_id = ?");
  const delTags = db.prepare("DELETE FROM template_tags WHERE template_id = ?");
  return {
    get: (id) => {
      const r = get.get(id) as Row | undefined;
      return r && fromRow(r);
    },
    insert: (b) => void insert.run(b.id, ...columns(b)),
    update: (b) => void update.run(...columns(b), b.id),
    listByTemplate: (templateID) => (list.all(templateID) as unknown as Row[]).map(fromRow),
    latest: (templateID) => {
      const r = latest.get(templateID) as Row | undefined;
      return r && fromRow(r);
    },
    count: (templateID) => Number((count.get(templateID) as { n: number }).n),
    unfinished: () => (unfinished.all() as unknown as Row[]).map(fromRow),
    appendLog: (buildID, e) => void append.run(buildID, buildID, e.timestamp, e.level, e.message, e.step ?? null),
    logs: (buildID, offset, limit) =>
      (logs.all(buildID, offset, limit) as unknown as { timestamp: string; level: BuildLogEntry["level"]; message: string; step: string | null }[]).map((r) => ({
        timestamp: r.timestamp, level: r.level, message: r.message, ...(r.step !== null ? { step: r.step } : {}),
      })),
    setTag: (templateID, tag, buildID) => void setTag.run(templateID, tag, buildID),
    deleteTag: (templateID, tag) => Number(deleteTag.run(templateID, tag).changes) > 0,
    tags: (templateID) => (tags.all(templateID) as { tag: string; build_id: string }[]).map((r) => ({ tag: r.tag, buildID: r.build_id })),
    deleteTemplate: (templateID) => {
      delLogs.run(templateID);
      delBuilds.run(templateID);
      delTags.run(templateID);
    },
  };
}

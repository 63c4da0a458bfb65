import type { DatabaseSync } from "node:sqlite";

/** A template build sandboxes are made from. */
export interface Template {
  id: string;
  alias: string | null;
  teamID: string;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string;
  defaultUser: string | null;
  defaultWorkdir: string | null;
  rootfs: string;
  buildID: string;
  createdAt: string;
  updatedAt: string;
  spawnCount: number;
  lastSpawnedAt: string | null;
  /** Run in every new sandbox (in the background), and the check create waits for. */
  startCmd?: string | null;
  readyCmd?: string | null;
  /** Environment variables the template's steps set (ENV), given to every sandbox's envd. */
  envs?: Record<string, string>;
  /** Published by its team: every team may start sandboxes from it. */
  public?: boolean;
}

/** What a finished build makes current on its template. */
export type TemplateBuildResult = Pick<Template, "rootfs" | "buildID" | "envdVersion" | "defaultUser" | "defaultWorkdir" | "cpuCount" | "memoryMB"> & {
  startCmd: string | null;
  readyCmd: string | null;
  envs: Record<string, string>;
};

/** The templates table. */
export interface Templates {
  get(id: string): Template | undefined;
  byAlias(alias: string): Template | undefined;
  listByTeam(teamID: string): Template[];
  insert(t: Template): void;
  /** Points a template at a new rootfs and envd version (a rebuilt base). */
  updateBuild(id: string, rootfs: string, envdVersion: string): void;
  /** Counts one more sandbox made from the template. */
  spawned(id: string, at: string): void;
  /** Makes a finished build the template's current one. */
  setBuild(id: string, b: TemplateBuildResult): void;
  /** Publishes (true) or unpublishes the template. */
  setPublic(id: string, pub: boolean): void;
  /** Sets the size of the disk its sandboxes get. */
  setDiskSize(id: string, diskSizeMB: number): void;
  /** Removes the template row (its builds, logs and tags are removed by their tables). */
  delete(id: string): void;
}

interface Row {
  id: string;
  alias: string | null;
  team_id: string;
  cpu_count: number;
  memory_mb: number;
  disk_mb: number;
  envd_version: string;
  default_user: string | null;
  default_workdir: string | null;
  rootfs: string;
  build_id: string;
  created_at: string;
  updated_at: string;
  spawn_count: number;
  last_spawned_at: string | null;
  start_cmd: string | null;
  ready_cmd: string | null;
  envs: string | null;
  public: number | null;
}

function fromRow(r: Row): Template {
  return {
    id: r.id, alias: r.alias, teamID: r.team_id, cpuCount: Number(r.cpu_count), memoryMB: Number(r.memory_mb), diskSizeMB: Number(r.disk_mb),
    envdVersion: r.envd_version, defaultUser: r.default_user, defaultWorkdir: r.default_workdir, rootfs: r.rootfs, buildID: r.build_id,
    createdAt: r.created_at, updatedAt: r.updated_at, spawnCount: Number(r.spawn_count), lastSpawnedAt: r.last_spawned_at,
    startCmd: r.start_cmd, readyCmd: r.ready_cmd, envs: r.envs ? (JSON.parse(r.envs) as Record<string, string>) : {}, public: Number(r.public ?? 0) === 1,
  };
}

/** The templates table. */
export function templatesTable(db: DatabaseSync): Templates {
  const get = db.prepare("SELECT * FROM templates WHERE id = ?");
  const byAlias = db.prepare("SELECT * FROM templates WHERE alias = ?");
  const list = db.prepare("SELECT * FROM templates WHERE team_id = ? ORDER BY created_at, id");
  const insert = db.prepare(`INSERT INTO templates (id, alias, team_id, cpu_count, memory_mb, disk_mb, envd_version, default_user, default_workdir,
    rootfs, build_id, created_at, updated_at, spawn_count, last_spawned_at, start_cmd, ready_cmd, envs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const setBuild = db.prepare(`UPDATE templates SET rootfs = ?, build_id = ?, envd_version = ?, default_user = ?, default_workdir = ?, cpu_count = ?, memory_mb = ?,
    start_cmd = ?, ready_cmd = ?, envs = ?, updated_at = ? WHERE id = ?`);
  const del = db.prepare("DELETE FROM templates WHERE id = ?");
  const updateBuild = db.prepare("UPDATE templates SET rootfs = ?, envd_version = ?, updated_at = ? WHERE id = ?");
  const spawned = db.prepare("UPDATE templates SET spawn_count = spawn_count + 1, last_spawned_at = ? WHERE id = ?");
  const setPublic = db.prepare("UPDATE templates SET public = ?, updated_at = ? WHERE id = ?");
  const setDisk = db.prepare("UPDATE templates SET disk_mb = ?, updated_at = ? WHERE id = ?");
  return {
    get: (id) => {
      const r = get.get(id) as Row | undefined;
      return r && fromRow(r);
    },
    byAlias: (alias) => {
      const r = byAlias.get(alias) as Row | undefined;
      return r && fromRow(r);
    },
    listByTeam: (teamID) => (list.all(teamID) as unknown as Row[]).map(fromRow),
    insert: (t) =>
      void insert.run(t.id, t.alias, t.teamID, t.cpuCount, t.memoryMB, t.diskSizeMB, t.envdVersion, t.defaultUser, t.defaultWorkdir,
        t.rootfs, t.buildID, t.createdAt, t.updatedAt, t.spawnCount, t.lastSpawnedAt, t.startCmd ?? null, t.readyCmd ?? null, JSON.stringify(t.envs ?? {})),
    updateBuild: (id, rootfs, envdVersion) => void updateBuild.run(rootfs, envdVersion, new Date().toISOString(), id),
    spawned: (id, at) => void spawned.run(at, id),
    setBuild: (id, b) =>
      void setBuild.run(b.rootfs, b.buildID, b.envdVersion, b.defaultUser, b.defaultWorkdir, b.cpuCount, b.memoryMB, b.startCmd, b.readyCmd, JSON.stringify(b.envs), new Date().toISOString(), id),
    setPublic: (id, pub) => void setPublic.run(pub ? 1 : 0, new Date().toISOString(), id),
    setDiskSize: (id, mb) => void setDisk.run(mb, new Date().toISOString(), id),
    delete: (id) => void del.run(id),
  };
}

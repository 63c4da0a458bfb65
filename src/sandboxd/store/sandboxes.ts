import type { DatabaseSync } from "node:sqlite";

/** A sandbox's stored state: what survives a sandboxd restart. */
export interface SandboxRow {
  id: string;
  teamID: string;
  templateID: string;
  state: "starting" | "running" | "paused";
  /** ISO 8601 with milliseconds (sorts as text). */
  startedAt: string;
  endAt: string;
  metadata: Record<string, string>;
  autoPause: boolean;
  /** A paused sandbox is resumed by the first request the proxy gets for it (E2B's lifecycle autoResume). */
  autoResume?: boolean;
  secure: boolean;
  trafficToken: string | null;
  network: Record<string, unknown>;
  allowInternetAccess: boolean;
  ip: string | null;
  envdPort: number | null;
  envdVersion: string;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  /** The template build the sandbox runs (its rootfs is the overlay's lower layer); null on rows older than snapshots. */
  buildID?: string | null;
  rootfs?: string | null;
  /** The variables envd was given at create (the template's and the caller's), for a cold start on the sandbox's disk. */
  envVars?: Record<string, string> | null;
  /** A timeout's pause keeps memory (a freeze; the default) or only the disk (false: pause to disk). */
  autoPauseMemory?: boolean;
  /** Paused to disk: no container, memory and CPU freed, the disk kept; resumed by a cold start. */
  onDisk?: boolean;
  /**
   * An operation under way that a crash must undo: a snapshot (or a fork's) being copied from the
   * sandbox's disk, or a cold start on its own disk; `state` and `onDisk` stay what the sandbox
   * returns to. Null or absent when none is.
   */
  transition?: Transition | null;
  /** The snapshot image a `snapshotting` sandbox is being copied to (removed if a crash cuts it short). */
  transitionImage?: string | null;
}

/** An operation under way on a sandbox (see SandboxRow.transition). */
export type Transition = "snapshotting" | "resuming";

/** The sandboxes table. */
export interface Sandboxes {
  get(id: string): SandboxRow | undefined;
  all(): SandboxRow[];
  listByTeam(teamID: string): SandboxRow[];
  /** Sandboxes of a team that count against its concurrency limit (starting and running). */
  countLive(teamID: string): number;
  insert(row: SandboxRow): void;
  /** Writes every mutable field of a row back. */
  update(row: SandboxRow): void;
  delete(id: string): void;
}

interface Row {
  id: string;
  team_id: string;
  template_id: string;
  state: SandboxRow["state"];
  started_at: string;
  end_at: string;
  metadata: string;
  auto_pause: number;
  auto_resume: number;
  secure: number;
  traffic_token: string | null;
  network: string;
  allow_internet_access: number;
  ip: string | null;
  envd_port: number | null;
  envd_version: string;
  cpu_count: number;
  memory_mb: number;
  disk_mb: number;
  build_id: string | null;
  rootfs: string | null;
  env_vars: string | null;
  auto_pause_memory: number;
  on_disk: number;
  transition: Transition | null;
  transition_image: string | null;
}

function fromRow(r: Row): SandboxRow {
  return {
    id: r.id, teamID: r.team_id, templateID: r.template_id, state: r.state, startedAt: r.started_at, endAt: r.end_at,
    metadata: JSON.parse(r.metadata) as Record<string, string>, autoPause: Boolean(r.auto_pause), autoResume: Boolean(r.auto_resume), secure: Boolean(r.secure),
    trafficToken: r.traffic_token, network: JSON.parse(r.network) as Record<string, unknown>, allowInternetAccess: Boolean(r.allow_internet_access),
    ip: r.ip, envdPort: r.envd_port === null ? null : Number(r.envd_port), envdVersion: r.envd_version,
    cpuCount: Number(r.cpu_count), memoryMB: Number(r.memory_mb), diskSizeMB: Number(r.disk_mb),
    buildID: r.build_id, rootfs: r.rootfs, envVars: r.env_vars === null ? null : (JSON.parse(r.env_vars) as Record<string, string>),
    autoPauseMemory: Number(r.auto_pause_memory) !== 0, onDisk: Boolean(r.on_disk),
    transition: r.transition ?? null, transitionImage: r.transition_image ?? null,
  };
}

/** The sandboxes table. */
export function sandboxesTable(db: DatabaseSync): Sandboxes {
  const get = db.prepare("SELECT * FROM sandboxes WHERE id = ?");
  const all = db.prepare("SELECT * FROM sandboxes");
  const byTeam = db.prepare("SELECT * FROM sandboxes WHERE team_id = ?");
  const countLive = db.prepare("SELECT count(*) AS n FROM sandboxes WHERE team_id = ? AND state IN ('starting', 'running')");
  const insert = db.prepare(`INSERT INTO sandboxes (id, team_id, template_id, state, started_at, end_at, metadata, auto_pause, auto_resume, secure, traffic_token,
    network, allow_internet_access, ip, envd_port, envd_version, cpu_count, memory_mb, disk_mb, build_id, rootfs, env_vars, auto_pause_memory, on_disk,
    transition, transition_image)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const update = db.prepare(`UPDATE sandboxes SET state = ?, started_at = ?, end_at = ?, metadata = ?, auto_pause = ?, ip = ?, envd_port = ?,
    envd_version = ?, network = ?, allow_internet_access = ?, on_disk = ?, transition = ?, transition_image = ? WHERE id = ?`);
  const del = db.prepare("DELETE FROM sandboxes WHERE id = ?");
  return {
    get: (id) => {
      const r = get.get(id) as Row | undefined;
      return r && fromRow(r);
    },
    all: () => (all.all() as unknown as Row[]).map(fromRow),
    listByTeam: (teamID) => (byTeam.all(teamID) as unknown as Row[]).map(fromRow),
    countLive: (teamID) => Number((countLive.get(teamID) as { n: number }).n),
    insert: (s) =>
      void insert.run(s.id, s.teamID, s.templateID, s.state, s.startedAt, s.endAt, JSON.stringify(s.metadata), s.autoPause ? 1 : 0, s.autoResume ? 1 : 0, s.secure ? 1 : 0,
        s.trafficToken, JSON.stringify(s.network), s.allowInternetAccess ? 1 : 0, s.ip, s.envdPort, s.envdVersion, s.cpuCount, s.memoryMB, s.diskSizeMB,
        s.buildID ?? null, s.rootfs ?? null, s.envVars ? JSON.stringify(s.envVars) : null, s.autoPauseMemory === false ? 0 : 1, s.onDisk ? 1 : 0,
        s.transition ?? null, s.transitionImage ?? null),
    update: (s) =>
      void update.run(s.state, s.startedAt, s.endAt, JSON.stringify(s.metadata), s.autoPause ? 1 : 0, s.ip, s.envdPort, s.envdVersion,
        JSON.stringify(s.network), s.allowInternetAccess ? 1 : 0, s.onDisk ? 1 : 0, s.transition ?? null, s.transitionImage ?? null, s.id),
    delete: (id) => void del.run(id),
  };
}

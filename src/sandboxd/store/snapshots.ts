import type { DatabaseSync } from "node:sqlite";
import type { Template } from "./templates.js";

/** A snapshot of a sandbox's disk: what `Sandbox.create(<snapshot>)` starts from. */
export interface SnapshotRow {
  /** The snapshot's ID (20 of [a-z0-9], as a template's); with ":default" it is the SDK's snapshotId. */
  id: string;
  teamID: string;
  /** The name the team gave it (unique in the team), or null. */
  name: string | null;
  sourceSandboxID: string;
  templateID: string;
  buildID: string;
  /** The storage pool's snapshot image holding the disk (a new one each time a named snapshot is taken again). */
  image: string;
  /** What a sandbox made from it starts with: the source's template at its build (rootfs, user, commands, sizes). */
  template: Template;
  /** Bytes the disk image holds (extents shared with other disks and snapshots count in full). */
  sizeBytes: number;
  /** ISO 8601 with milliseconds (sorts as text). */
  createdAt: string;
}

/** The snapshots table. */
export interface Snapshots {
  get(id: string): SnapshotRow | undefined;
  byName(teamID: string, name: string): SnapshotRow | undefined;
  listByTeam(teamID: string): SnapshotRow[];
  all(): SnapshotRow[];
  countByTeam(teamID: string): number;
  /** How many snapshots were taken of a template's sandboxes. */
  countByTemplate(templateID: string): number;
  insert(row: SnapshotRow): void;
  /** Points a named snapshot at a new capture (image, source, template, size, time). */
  replace(row: SnapshotRow): void;
  delete(id: string): void;
}

interface Row {
  id: string;
  team_id: string;
  name: string | null;
  source_sandbox_id: string;
  template_id: string;
  build_id: string;
  image: string;
  template: string;
  size_bytes: number;
  created_at: string;
}

const fromRow = (r: Row): SnapshotRow => ({
  id: r.id, teamID: r.team_id, name: r.name, sourceSandboxID: r.source_sandbox_id, templateID: r.template_id, buildID: r.build_id,
  image: r.image, template: JSON.parse(r.template) as Template, sizeBytes: Number(r.size_bytes), createdAt: r.created_at,
});

/** The snapshots table. */
export function snapshotsTable(db: DatabaseSync): Snapshots {
  const get = db.prepare("SELECT * FROM snapshots WHERE id = ?");
  const byName = db.prepare("SELECT * FROM snapshots WHERE team_id = ? AND name = ?");
  const byTeam = db.prepare("SELECT * FROM snapshots WHERE team_id = ? ORDER BY created_at DESC, id");
  const all = db.prepare("SELECT * FROM snapshots");
  const count = db.prepare("SELECT count(*) AS n FROM snapshots WHERE team_id = ?");
  const countTpl = db.prepare("SELECT count(*) AS n FROM snapshots WHERE template_id = ?");
  const insert = db.prepare(`INSERT INTO snapshots (id, team_id, name, source_sandbox_id, template_id, build_id, image, template, size_bytes, created_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const replace = db.prepare(`UPDATE snapshots SET source_sandbox_id = ?, template_id = ?, build_id = ?, image = ?, template = ?, size_bytes = ?, created_at = ? WHERE id = ?`);
  const del = db.prepare("DELETE FROM snapshots WHERE id = ?");
  const one = (r: unknown) => (r ? fromRow(r as Row) : undefined);
  return {
    get: (id) => one(get.get(id)),
    byName: (teamID, name) => one(byName.get(teamID, name)),
    listByTeam: (teamID) => (byTeam.all(teamID) as unknown as Row[]).map(fromRow),
    all: () => (all.all() as unknown as Row[]).map(fromRow),
    countByTeam: (teamID) => Number((count.get(teamID) as { n: number }).n),
    countByTemplate: (templateID) => Number((countTpl.get(templateID) as { n: number }).n),
    insert: (s) =>
      void insert.run(s.id, s.teamID, s.name, s.sourceSandboxID, s.templateID, s.buildID, s.image, JSON.stringify(s.template), s.sizeBytes, s.createdAt),
    replace: (s) => void replace.run(s.sourceSandboxID, s.templateID, s.buildID, s.image, JSON.stringify(s.template), s.sizeBytes, s.createdAt, s.id),
    delete: (id) => void del.run(id),
  };
}

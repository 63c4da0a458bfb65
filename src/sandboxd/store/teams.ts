import type { DatabaseSync } from "node:sqlite";

/** A team: the owner of keys, templates and sandboxes, and its limits. */
export interface Team {
  id: string;
  name: string;
  maxConcurrent: number;
  maxLengthHours: number;
}

/** The teams table. */
export interface Teams {
  get(id: string): Team | undefined;
  insert(team: Team): void;
  count(): number;
  list(): Team[];
  /** Changes a team's name and limits (fields left undefined stay). */
  update(id: string, change: Partial<Omit<Team, "id">>): void;
}

interface Row {
  id: string;
  name: string;
  max_concurrent: number;
  max_length_hours: number;
}

/** The teams table. */
export function teamsTable(db: DatabaseSync): Teams {
  const get = db.prepare("SELECT * FROM teams WHERE id = ?");
  const insert = db.prepare("INSERT INTO teams (id, name, max_concurrent, max_length_hours) VALUES (?, ?, ?, ?)");
  const count = db.prepare("SELECT count(*) AS n FROM teams");
  const list = db.prepare("SELECT * FROM teams ORDER BY id");
  const update = db.prepare("UPDATE teams SET name = coalesce(?, name), max_concurrent = coalesce(?, max_concurrent), max_length_hours = coalesce(?, max_length_hours) WHERE id = ?");
  const fromRow = (r: Row): Team => ({ id: r.id, name: r.name, maxConcurrent: Number(r.max_concurrent), maxLengthHours: Number(r.max_length_hours) });
  return {
    get(id) {
      const r = get.get(id) as Row | undefined;
      return r && fromRow(r);
    },
    list: () => (list.all() as unknown as Row[]).map(fromRow),
    update: (id, c) => void update.run(c.name ?? null, c.maxConcurrent ?? null, c.maxLengthHours ?? null, id),
    insert: (t) => void insert.run(t.id, t.name, t.maxConcurrent, t.maxLengthHours),
    count: () => Number((count.get() as { n: number }).n),
  };
}

import { readFileSync, statSync } from "node:fs";

/** A user from the OS user database, with everything a spawn or chown needs. */
export interface User {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  readonly home: string;
  readonly shell: string;
  /** Supplementary group ids (primary gid first, then every group listing the user). */
  readonly groups: readonly number[];
}

interface Snapshot {
  key: string;
  byName: Map<string, User>;
  userById: Map<number, string>;
  groupById: Map<number, string>;
}

/** Largest id a process can be given: ids are unsigned 32-bit, and 2^32 - 1 is (uid_t)-1, "unchanged". */
export const MAX_ID = 0xfffffffe;

/** Whether `id` can be applied to a process: an integer from 0 to MAX_ID. */
export function isApplicableId(id: number): boolean {
  return Number.isInteger(id) && id >= 0 && id <= MAX_ID;
}

/**
 * Why a process cannot run as `user` (its uid, gid or a group id is beyond 32 bits or is
 * (uid_t)-1, which setuid and setpriv would silently treat as "keep root's"); undefined when
 * every id can be applied.
 */
export function unapplicableIds(user: User): string | undefined {
  if (!isApplicableId(user.uid)) return `uid ${user.uid} of user '${user.name}' is not a valid id (0 to ${MAX_ID})`;
  if (!isApplicableId(user.gid)) return `gid ${user.gid} of user '${user.name}' is not a valid id (0 to ${MAX_ID})`;
  const group = user.groups.find((g) => !isApplicableId(g));
  if (group !== undefined) return `group id ${group} of user '${user.name}' is not a valid id (0 to ${MAX_ID})`;
  return undefined;
}

/** A decimal id field as the C library reads it; NaN for an empty or non-decimal one (the line is then skipped). */
function idField(text: string | undefined): number {
  return text !== undefined && /^\d{1,20}$/.test(text) ? Number(text) : NaN;
}

/**
 * Reads /etc/passwd and /etc/group, re-reading them whenever either file changes. The files are
 * checked (two stats) at most once per event-loop turn: one request asks several times (its
 * Basic user, then owner and group names of every entry it describes).
 */
export class UserDb {
  private snap: Snapshot | undefined;
  private checkedThisTurn = false;

  constructor(
    private readonly passwdPath = "/etc/passwd",
    private readonly groupPath = "/etc/group",
  ) {}

  /** Looks a user up by name; undefined when unknown. */
  lookup(name: string): User | undefined {
    return this.current().byName.get(name);
  }

  /** The user name owning a uid, or the decimal id when unknown. */
  userName(uid: number): string {
    return this.current().userById.get(uid) ?? String(uid);
  }

  /** The group name of a gid, or the decimal id when unknown. */
  groupName(gid: number): string {
    return this.current().groupById.get(gid) ?? String(gid);
  }

  private current(): Snapshot {
    if (this.snap && this.checkedThisTurn) return this.snap;
    const key = fileKey(this.passwdPath) + "|" + fileKey(this.groupPath);
    if (!this.snap || this.snap.key !== key) this.snap = load(key, this.passwdPath, this.groupPath);
    this.checkedThisTurn = true;
    setImmediate(() => (this.checkedThisTurn = false)).unref();
    return this.snap;
  }
}

function fileKey(path: string): string {
  try {
    const st = statSync(path);
    // Millisecond floats keep the nanoseconds' first digits: enough to see a rewrite.
    return `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
  } catch {
    return "missing";
  }
}

function readLines(path: string): string[][] {
  let text = "";
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter((l) => l && !l.startsWith("#"))
    .map((l) => l.split(":"));
}

function load(key: string, passwdPath: string, groupPath: string): Snapshot {
  const groupById = new Map<number, string>();
  const memberOf = new Map<string, number[]>();
  for (const [name, , gidText, members] of readLines(groupPath)) {
    const gid = idField(gidText);
    if (!name || !Number.isInteger(gid)) continue;
    if (!groupById.has(gid)) groupById.set(gid, name);
    for (const m of (members ?? "").split(",").filter(Boolean)) {
      const list = memberOf.get(m) ?? [];
      list.push(gid);
      memberOf.set(m, list);
    }
  }
  const byName = new Map<string, User>();
  const userById = new Map<number, string>();
  for (const [name, , uidText, gidText, , home, shell] of readLines(passwdPath)) {
    // An empty field is not uid 0 (Number("") is): such a line names no usable user.
    const uid = idField(uidText);
    const gid = idField(gidText);
    if (!name || !Number.isInteger(uid) || !Number.isInteger(gid)) continue;
    const groups = [gid, ...(memberOf.get(name) ?? []).filter((g) => g !== gid)];
    if (!byName.has(name)) byName.set(name, { name, uid, gid, home: home || "/", shell: shell || "/bin/sh", groups });
    if (!userById.has(uid)) userById.set(uid, name);
  }
  return { key, byName, userById, groupById };
}

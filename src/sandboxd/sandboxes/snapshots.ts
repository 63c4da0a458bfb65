/**
 * Snapshots of sandboxes' disks as the SDK sees them: taken (named or not, within the team's
 * quota), listed in pages, found by the ID or name a create names, and deleted once no create is
 * copying them. A snapshot is the disk only: a sandbox made from it boots afresh on a copy of it.
 */
import { Conflict, Invalid, invalid, LimitExceeded, OperationFailed } from "../errors.js";
import { randomId } from "../store/seed.js";
import type { SnapshotRow } from "../store/snapshots.js";
import type { Store } from "../store/store.js";
import { DEFAULT_TAG, parseName } from "../templates/names.js";
import type { Lifecycle } from "./lifecycle.js";
import { templateOfRow } from "./row-template.js";
import { settled } from "./transitions.js";

/** The SDK's SnapshotInfo: the ID to create from, and the snapshot's full names. */
export interface SnapshotInfo {
  snapshotID: string;
  names: string[];
}

/** What GET /snapshots asks for. */
export interface SnapshotQuery {
  sandboxID?: string;
  name?: string;
  limit: number;
  nextToken?: string;
}

/** A team's namespace in snapshot names: its name lower-cased, other characters as "-". */
export function teamSlug(store: Store, teamID: string): string {
  const name = (store.teams.get(teamID)?.name ?? teamID).toLowerCase().replace(/[^a-z0-9_-]+/g, "-");
  return name.replace(/^-+|-+$/g, "") || teamID;
}

/** The body of a snapshot: `<id>:default` when unnamed, else `<team>/<name>:<tag>` (its only name). */
export function snapshotInfo(store: Store, s: SnapshotRow): SnapshotInfo {
  if (!s.name) return { snapshotID: `${s.id}:${DEFAULT_TAG}`, names: [] };
  const full = `${teamSlug(store, s.teamID)}/${s.name}`;
  return { snapshotID: full, names: [full] };
}

/** "[namespace/]base[:tag]" read leniently (undefined when it cannot name a snapshot). */
function parseRef(ref: string): { base: string; tag: string } | undefined {
  try {
    const p = parseName(ref);
    return { base: p.name, tag: p.tag ?? DEFAULT_TAG };
  } catch {
    return undefined;
  }
}

/** The team's snapshot `ref` names: its ID (with no tag or ":default") or its name and tag; undefined when none. */
export function findSnapshot(store: Store, teamID: string, ref: string): SnapshotRow | undefined {
  const p = parseRef(ref);
  if (!p) return undefined;
  const byID = p.tag === DEFAULT_TAG ? store.snapshots.get(p.base) : undefined;
  if (byID && byID.teamID === teamID) return byID;
  return store.snapshots.byName(teamID, `${p.base}:${p.tag}`);
}

/**
 * POST /sandboxes/{id}/snapshots: a consistent copy of a running or paused sandbox's disk,
 * recorded for the team. A name the team already gave a snapshot moves to the new copy (the old
 * one is removed once no create is copying it). Refused past the team's quota (429) and for a
 * name a template has (409).
 */
export function takeSnapshot(l: Lifecycle, teamID: string, sandboxID: string, rawName: string | undefined): Promise<SnapshotInfo> {
  return l.lane(sandboxID, async () => {
    const { store } = l;
    const row = l.owned(teamID, sandboxID);
    const parsed = rawName === undefined ? undefined : parseName(rawName);
    const name = parsed && `${parsed.name}:${parsed.tag ?? DEFAULT_TAG}`;
    const existing = name ? store.snapshots.byName(teamID, name) : undefined;
    if (parsed && store.templates.byAlias(parsed.name)) throw new Conflict(`the name '${parsed.name}' is a template's (snapshots and templates share names); give the snapshot another name`);
    const quota = () => {
      if (!existing && store.snapshots.countByTeam(teamID) >= l.maxSnapshots) {
        throw new LimitExceeded(`you have reached the maximum number of snapshots (${l.maxSnapshots}); delete snapshots to take new ones`);
      }
    };
    quota();
    const template = templateOfRow(store, row);
    const image = "s" + randomId(20);
    let sizeBytes: number;
    // the store shows the copy under way, so a crash in the middle of it is undone at start-up
    l.record({ ...row, transition: "snapshotting", transitionImage: image });
    try {
      ({ sizeBytes } = await l.runtime.snapshot(row.id, image));
    } catch (err) {
      l.log.error({ sandboxID, err: (err as Error).message }, "taking a snapshot failed");
      await l.runtime.removeSnapshot(image).catch(() => undefined);
      l.record(settled(l, sandboxID));
      throw new OperationFailed(`Failed to snapshot sandbox ${sandboxID}: ${(err as Error).message}`);
    }
    const snap: SnapshotRow = {
      id: existing?.id ?? randomId(20), teamID, name: name ?? null, sourceSandboxID: row.id, templateID: row.templateID, buildID: template.buildID,
      image, template, sizeBytes, createdAt: new Date(l.clock.now()).toISOString(),
    };
    try {
      // the snapshot's record and the end of the sandbox's snapshotting are one write
      store.transaction(() => {
        quota();
        if (existing) store.snapshots.replace(snap);
        else store.snapshots.insert(snap);
        l.record(settled(l, sandboxID));
      });
    } catch (err) {
      await l.runtime.removeSnapshot(image).catch(() => undefined);
      l.record(settled(l, sandboxID));
      throw err;
    }
    if (existing) await l.snapshotUse.retire(existing.image);
    l.log.info({ sandboxID, snapshotID: snap.id, name: snap.name, sizeBytes }, "snapshot taken");
    return snapshotInfo(store, snap);
  });
}

/** A page cursor: base64url of "<createdAt>__<id>". */
const cursorOf = (s: SnapshotRow) => Buffer.from(`${s.createdAt}__${s.id}`, "utf8").toString("base64url");

/** GET /snapshots: the team's snapshots, newest first, filtered by source sandbox and name, one page at a time. */
export function listSnapshots(l: Lifecycle, teamID: string, q: SnapshotQuery): { items: SnapshotInfo[]; nextToken?: string } {
  let rows = l.store.snapshots.listByTeam(teamID);
  if (q.sandboxID !== undefined) rows = rows.filter((s) => s.sourceSandboxID === q.sandboxID);
  if (q.name !== undefined) {
    const found = findSnapshot(l.store, teamID, q.name);
    rows = rows.filter((s) => s.id === found?.id);
  }
  if (q.nextToken !== undefined) {
    const [at, id, extra] = Buffer.from(q.nextToken, "base64url").toString("utf8").split("__");
    if (!at || !id || extra !== undefined || !/^\d{4}-/.test(at)) throw new Invalid("Invalid next token");
    rows = rows.filter((s) => s.createdAt < at || (s.createdAt === at && s.id > id));
  }
  const page = rows.slice(0, q.limit);
  const items = page.map((s) => snapshotInfo(l.store, s));
  return rows.length > q.limit ? { items, nextToken: cursorOf(page[page.length - 1]) } : { items };
}

/**
 * Deletes the team's snapshot `ref` names (the SDK's deleteSnapshot, DELETE /templates/{id});
 * false when there is none. Refused (409) while a sandbox is being created from it; sandboxes
 * already made from it keep running (their disks are their own).
 */
export async function deleteSnapshot(l: Lifecycle, teamID: string, ref: string): Promise<boolean> {
  const snap = findSnapshot(l.store, teamID, ref);
  if (!snap) return false;
  if (l.snapshotUse.busy(snap.image)) throw new Conflict(`snapshot '${ref}' is in use: a sandbox is being created from it; delete it once that is done`);
  l.store.snapshots.delete(snap.id);
  await l.snapshotUse.retire(snap.image);
  l.log.info({ snapshotID: snap.id, name: snap.name }, "snapshot deleted");
  return true;
}

/**
 * Snapshots and templates share a team's names (the SDK's `Sandbox.create(name)` takes either):
 * why a new template may not be called `alias` (a snapshot of the team has that name, with any
 * tag), or undefined when it may.
 */
export function snapshotNameClash(store: Store, teamID: string, alias: string): string | undefined {
  const taken = store.snapshots.listByTeam(teamID).some((s) => s.name?.split(":")[0] === alias);
  return taken ? `the name '${alias}' is a snapshot's; give the template another name, or delete the snapshot first` : undefined;
}

/** Checks a snapshot name as the API receives it (400 naming the problem). */
export function checkSnapshotName(raw: unknown): string | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== "string") throw invalid(`field "name" must be a string`);
  parseName(raw);
  return raw;
}

/** The template a sandbox runs, at the build it was made from: what a snapshot of it or a cold start of it starts with. */
import type { SandboxRow } from "../store/sandboxes.js";
import type { Store } from "../store/store.js";
import type { Template } from "../store/templates.js";
import { OperationFailed } from "../errors.js";

/**
 * The template of `row` as the sandbox runs it: its build's rootfs, user, commands and variables
 * (the template's current ones when the row predates recording its build), with the sandbox's own
 * sizes and envd version. Throws OperationFailed when the template's files are gone.
 */
export function templateOfRow(store: Store, row: SandboxRow): Template {
  const tpl = store.templates.get(row.templateID);
  const buildID = row.buildID ?? tpl?.buildID;
  const rootfs = row.rootfs ?? tpl?.rootfs;
  if (!buildID || !rootfs) throw new OperationFailed(`the template sandbox ${row.id} was made from (${row.templateID}) no longer exists`);
  const build = tpl && tpl.buildID !== buildID ? store.builds.get(buildID) : undefined;
  const now = new Date().toISOString();
  return {
    id: row.templateID, alias: tpl?.alias ?? null, teamID: tpl?.teamID ?? row.teamID,
    cpuCount: row.cpuCount, memoryMB: row.memoryMB, diskSizeMB: row.diskSizeMB, envdVersion: row.envdVersion,
    defaultUser: build ? build.defaultUser : (tpl?.defaultUser ?? null), defaultWorkdir: build ? build.defaultWorkdir : (tpl?.defaultWorkdir ?? null),
    rootfs, buildID, createdAt: tpl?.createdAt ?? now, updatedAt: tpl?.updatedAt ?? now, spawnCount: 0, lastSpawnedAt: null,
    startCmd: build ? build.startCmd : (tpl?.startCmd ?? null), readyCmd: build ? build.readyCmd : (tpl?.readyCmd ?? null),
    envs: (build ? build.envs : tpl?.envs) ?? {},
  };
}

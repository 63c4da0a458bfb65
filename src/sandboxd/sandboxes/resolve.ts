import { DEFAULT_TEAM_ID } from "../store/seed.js";
import type { Store } from "../store/store.js";
import type { Template } from "../store/templates.js";
import { Forbidden, Invalid, NotFound } from "../errors.js";

/** Compares dotted versions ("0.2.0" vs "v0.1.4"). */
export function versionAtLeast(v: string, min: string): boolean {
  const a = v.replace(/^v/, "").split(/[.-]/).map((x) => Number.parseInt(x, 10) || 0);
  const b = min.split(".").map(Number);
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== b[i]) return (a[i] ?? 0) > b[i];
  return true;
}

/**
 * The template a create names: an ID or alias, optionally "namespace/" before and ":tag" after,
 * lower-cased; unknown → NotFound, another team's → Forbidden (except a published one and the default
 * team's `base`, which every team may use, as E2B's public base template), no ready build → Invalid. A tag gives the build it
 * points at (its rootfs, user, commands) in place of the template's current one.
 */
export function resolveTemplate(store: Store, teamID: string, ref: string): Template {
  const name = ref.trim().toLowerCase();
  const m = /^(?:[a-z0-9_-]+\/)?([a-z0-9_-]+)(?::([a-z0-9_.-]+))?$/.exec(name);
  if (!m) throw new Invalid(`invalid template reference '${ref}'`);
  const [, base, tag] = m;
  const tpl = store.templates.get(base) ?? store.templates.byAlias(base);
  if (!tpl) throw new NotFound(`template '${ref}' not found`);
  const shared = (tpl.teamID === DEFAULT_TEAM_ID && tpl.alias === "base") || tpl.public === true;
  if (tpl.teamID !== teamID && !shared) throw new Forbidden(`you don't have access to template '${ref}'`);
  const tagged = tag ? store.builds.tags(tpl.id).find((t) => t.tag === tag) : undefined;
  if (tag && !tagged && tag !== "default") throw new NotFound(`tag '${tag}' does not exist for template '${base}'`);
  if (tagged && tagged.buildID !== tpl.buildID) {
    const b = store.builds.get(tagged.buildID);
    if (!b || b.status !== "ready" || !b.rootfs) throw new Invalid(`the build tag '${tag}' points at is not ready`);
    return {
      ...tpl, buildID: b.id, rootfs: b.rootfs, envdVersion: b.envdVersion ?? tpl.envdVersion, defaultUser: b.defaultUser, defaultWorkdir: b.defaultWorkdir,
      cpuCount: b.cpuCount, memoryMB: b.memoryMB, startCmd: b.startCmd, readyCmd: b.readyCmd, envs: b.envs ?? {},
    };
  }
  if (!tpl.rootfs) throw new Invalid(`template '${ref}' has no ready build yet (see its build status)`);
  return tpl;
}

/** GET /templates/aliases/{alias}: the template's ID for its own team; NotFound unknown, Forbidden another team's. */
export function templateAliasBody(store: Store, teamID: string, alias: string): { templateID: string; public: boolean } {
  const tpl = store.templates.byAlias(alias.toLowerCase());
  if (!tpl) throw new NotFound(`template '${alias}' not found`);
  if (tpl.teamID !== teamID && tpl.public !== true) throw new Forbidden(`you don't have access to template '${alias}'`);
  return { templateID: tpl.id, public: tpl.public === true };
}

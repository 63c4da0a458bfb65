import { DEFAULT_TEAM_ID } from "../store/seed.js";
import type { Store } from "../store/store.js";
import type { Template } from "../store/templates.js";
import { ApiError } from "./errors.js";

/** Compares dotted versions ("0.2.0" vs "v0.1.4"). */
export function versionAtLeast(v: string, min: string): boolean {
  const a = v.replace(/^v/, "").split(/[.-]/).map((x) => Number.parseInt(x, 10) || 0);
  const b = min.split(".").map(Number);
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== b[i]) return (a[i] ?? 0) > b[i];
  return true;
}

/**
 * The template a create names: an ID or alias, optionally "namespace/" before and ":tag" after
 * (only ":default" exists here), lower-cased; unknown → 404, another team's → 403, except the
 * default team's `base`, which every team may use (E2B's public base template).
 */
export function resolveTemplate(store: Store, teamID: string, ref: string): Template {
  const name = ref.trim().toLowerCase();
  const m = /^(?:[a-z0-9_-]+\/)?([a-z0-9_-]+)(?::([a-z0-9_.-]+))?$/.exec(name);
  if (!m) throw new ApiError(400, `invalid template reference '${ref}'`);
  const [, base, tag] = m;
  const tpl = store.templates.get(base) ?? store.templates.byAlias(base);
  if (!tpl) throw new ApiError(404, `template '${ref}' not found`);
  const shared = tpl.teamID === DEFAULT_TEAM_ID && tpl.alias === "base";
  if (tpl.teamID !== teamID && !shared) throw new ApiError(403, `you don't have access to template '${ref}'`);
  if (tag && tag !== "default") throw new ApiError(404, `tag '${tag}' does not exist for template '${base}'`);
  return tpl;
}

import type { Logger } from "../log.js";
import { WarmPool } from "../pool/warm-pool.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Resources } from "./budget.js";
import { randomId } from "../store/seed.js";
import type { Store } from "../store/store.js";
import type { Template } from "../store/templates.js";
import { makeWarm, poolable } from "./launch.js";

/** A template other than the default stays warm this long after its last create. */
const WARM_FOR_MS = 10 * 60_000;

/** A new sandbox ID: "i" + 20 of [a-z0-9], as E2B's. */
export const newSandboxID = (): string => "i" + randomId(20);

/**
 * The service's warm pool: the default template always, and each other template for ten minutes
 * after it was last used to create a sandbox, most recently used first.
 */
export function createServicePool(o: { store: Store; runtime: Runtime; log: Logger; size: number; defaultTemplateID?: string; foregroundBusy(): boolean; admit(need: Resources, pooled: Resources): boolean }) {
  const used = new Map<string, number>();
  const templates = (): Template[] => {
    const now = Date.now();
    for (const [id, at] of used) if (now - at > WARM_FOR_MS) used.delete(id);
    const ids = [...new Set([...(o.defaultTemplateID ? [o.defaultTemplateID] : []), ...[...used].sort((a, b) => b[1] - a[1]).map(([id]) => id)])];
    return ids.map((id) => o.store.templates.get(id)).filter((t): t is Template => !!t && poolable(t));
  };
  const pool = new WarmPool({
    size: o.size, log: o.log, templates, newID: newSandboxID, foregroundBusy: o.foregroundBusy, admit: o.admit,
    make: (tpl, id, signal) => makeWarm(o.runtime, tpl, id, signal),
    remove: (id) => o.runtime.remove(id),
    running: async (ids) => {
      const live = new Set((await o.runtime.list()).filter((x) => x.status === "running").map((x) => x.sandboxID));
      return new Set(ids.filter((id) => live.has(id)));
    },
  });
  return {
    pool,
    /** Claims a pooled sandbox of the template's build, when one waits, and marks the template in use. */
    async take(tpl: Template) {
      if (pool.enabled) used.set(tpl.id, Date.now());
      if (pool.enabled && poolable(tpl)) return pool.take(tpl);
      pool.countMiss();
      return undefined;
    },
  };
}

/** The service's pool and its claim. */
export type ServicePool = ReturnType<typeof createServicePool>;

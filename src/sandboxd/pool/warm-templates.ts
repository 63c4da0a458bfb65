/**
 * The sandbox service's warm pool: the default template always, and each other template for ten
 * minutes after it was last used to create a sandbox, most recently used first.
 */
import type { Clock } from "../clock.js";
import type { EnvdConnector } from "../envd-client/client.js";
import type { Logger } from "../log.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Store } from "../store/store.js";
import type { Template } from "../store/templates.js";
import { newSandboxID } from "./spec.js";
import { WarmPool, type PoolResources, type WarmSandbox } from "./warm-pool.js";
import { makeWarm, poolable } from "./warm-start.js";

/** A template other than the default stays warm this long after its last create. */
const WARM_FOR_MS = 10 * 60_000;

/** What the service's pool is built over. */
export interface TemplatePoolOptions {
  store: Store;
  runtime: Runtime;
  envd: EnvdConnector;
  log: Logger;
  clock: Clock;
  /** Sandboxes kept per warm template (0: none). */
  size: number;
  defaultTemplateID?: string;
  foregroundBusy(): boolean;
  admit(need: PoolResources, pooled: PoolResources): boolean;
}

/** The service's pool and its claim. */
export interface TemplatePool {
  pool: WarmPool;
  /** Claims a pooled sandbox of the template's build, when one waits, and marks the template in use. */
  take(tpl: Template): Promise<WarmSandbox | undefined>;
}

/** The pool over the store's templates and the runtime. */
export function createTemplatePool(o: TemplatePoolOptions): TemplatePool {
  const used = new Map<string, number>();
  const templates = (): Template[] => {
    const now = o.clock.now();
    for (const [id, at] of used) if (now - at > WARM_FOR_MS) used.delete(id);
    const ids = [...new Set([...(o.defaultTemplateID ? [o.defaultTemplateID] : []), ...[...used].sort((a, b) => b[1] - a[1]).map(([id]) => id)])];
    return ids.map((id) => o.store.templates.get(id)).filter((t): t is Template => !!t && poolable(t));
  };
  const pool = new WarmPool({
    size: o.size, log: o.log, clock: o.clock, templates, newID: newSandboxID, foregroundBusy: o.foregroundBusy, admit: o.admit,
    make: (tpl, id, signal) => makeWarm(o.runtime, o.envd, tpl, id, signal),
    remove: (id) => o.runtime.remove(id),
    running: async (ids) => {
      const live = new Set((await o.runtime.list()).filter((x) => x.status === "running").map((x) => x.sandboxID));
      return new Set(ids.filter((id) => live.has(id)));
    },
  });
  return {
    pool,
    async take(tpl) {
      if (pool.enabled) used.set(tpl.id, o.clock.now());
      if (pool.enabled && poolable(tpl)) return pool.take(tpl);
      pool.countMiss();
      return undefined;
    },
  };
}

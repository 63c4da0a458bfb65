import type { RouteIndex, RouteTarget } from "../proxy/target.js";

/** The in-memory map of routable sandboxes the proxy reads (kept in step with the store by the lifecycle). */
export interface SandboxIndex extends RouteIndex {
  set(target: RouteTarget): void;
  delete(sandboxID: string): void;
  size(): number;
}

/** An empty index. */
export function createSandboxIndex(): SandboxIndex {
  const map = new Map<string, RouteTarget>();
  return {
    lookup: (id) => map.get(id),
    set: (t) => void map.set(t.sandboxID, Object.freeze({ ...t })),
    delete: (id) => void map.delete(id),
    size: () => map.size,
  };
}

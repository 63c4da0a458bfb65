/** What holds a template: the sandboxes that run or are paused from it and the snapshots taken of them. */
import type { Store } from "../store/store.js";

const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/**
 * What keeps template `templateID` from being deleted, in words ("2 running sandboxes and 1
 * snapshot"), or undefined when nothing does. Sandboxes being made count as running.
 */
export function templateHolders(store: Store, templateID: string): string | undefined {
  const rows = store.sandboxes.all().filter((s) => s.templateID === templateID);
  const running = rows.filter((s) => s.state !== "paused").length;
  const frozen = rows.filter((s) => s.state === "paused" && !s.onDisk).length;
  const onDisk = rows.filter((s) => s.state === "paused" && s.onDisk).length;
  const snapshots = store.snapshots.countByTemplate(templateID);
  const parts = [
    running > 0 && count(running, "running sandbox", "running sandboxes"),
    frozen > 0 && count(frozen, "paused sandbox", "paused sandboxes"),
    onDisk > 0 && count(onDisk, "sandbox paused to disk", "sandboxes paused to disk"),
    snapshots > 0 && count(snapshots, "snapshot", "snapshots"),
  ].filter((p): p is string => typeof p === "string");
  if (parts.length === 0) return undefined;
  return parts.length === 1 ? parts[0] : `${parts.slice(0, -1).join(", ")} and ${parts[parts.length - 1]}`;
}

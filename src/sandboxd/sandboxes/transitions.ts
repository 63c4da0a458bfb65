/** Ending a sandbox's transition (a snapshot's copy, a cold start) in the phase it returns to. */
import type { SandboxRow } from "../store/sandboxes.js";
import type { Lifecycle } from "./lifecycle.js";

/** Sandbox `id`'s current row with its transition ended (what `record` then writes back). */
export function settled(l: Lifecycle, id: string): SandboxRow {
  const row = l.store.sandboxes.get(id);
  if (!row) throw new Error(`sandbox ${id} has no row to settle`);
  return { ...row, transition: null, transitionImage: null };
}

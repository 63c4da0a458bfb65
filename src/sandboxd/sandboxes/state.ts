/** A sandbox's lifecycle states and the moves between them. */
import type { SandboxRow } from "../store/sandboxes.js";

/** starting: being made (not routable); running: envd serves; paused: frozen in memory. */
export type SandboxState = SandboxRow["state"];

/** Where each state may go (a sandbox leaves any state by being removed). */
const MOVES: Readonly<Record<SandboxState, readonly SandboxState[]>> = {
  starting: ["starting", "running"],
  running: ["running", "paused"],
  paused: ["paused", "running"],
};

/** Whether a sandbox in `from` (undefined: not yet recorded) may be recorded in `to`. */
export function canMove(from: SandboxState | undefined, to: SandboxState): boolean {
  return from === undefined ? to === "starting" : MOVES[from].includes(to);
}

/**
 * The sandbox lifecycle as one state machine: the phases a stored row can be in and the moves
 * between them. A row's phase is read from its `state`, `onDisk` and `transition` columns: the
 * API shows `state` (running or paused), the phase says what the control plane is doing.
 */
import type { SandboxRow } from "../store/sandboxes.js";

/** The state the API reports: starting (being made, never listed), running or paused. */
export type SandboxState = SandboxRow["state"];

/**
 * starting: being made; running: envd serves; paused: frozen in memory; paused-on-disk: no
 * container, only its disk kept; snapshotting: its disk is being copied (it returns to the phase
 * its state and onDisk name); resuming: being cold-started on its own disk.
 */
export type Phase = "starting" | "running" | "paused" | "paused-on-disk" | "snapshotting" | "resuming";

/** The phase a row is in. */
export function phaseOf(row: Pick<SandboxRow, "state" | "onDisk" | "transition">): Phase {
  if (row.transition) return row.transition;
  if (row.state === "paused" && row.onDisk) return "paused-on-disk";
  return row.state;
}

/** The phase a row returns to when its transition ends or is undone. */
export function settledPhase(row: Pick<SandboxRow, "state" | "onDisk">): Phase {
  return phaseOf({ ...row, transition: null });
}

/** Where each phase may go (a sandbox leaves any phase by being removed). */
const MOVES: Readonly<Record<Phase, readonly Phase[]>> = {
  starting: ["starting", "running"],
  running: ["running", "paused", "paused-on-disk", "snapshotting"],
  paused: ["paused", "running", "paused-on-disk", "snapshotting"],
  "paused-on-disk": ["paused-on-disk", "resuming", "snapshotting"],
  snapshotting: ["running", "paused", "paused-on-disk"],
  resuming: ["running", "paused-on-disk"],
};

/**
 * Whether `prev` (undefined: not yet recorded) may be recorded as `next`. A snapshot returns the
 * sandbox to the phase it was taken in, and neither transition changes the state it returns to.
 */
export function canMove(prev: SandboxRow | undefined, next: SandboxRow): boolean {
  const to = phaseOf(next);
  if (!prev) return to === "starting";
  const from = phaseOf(prev);
  if (!MOVES[from].includes(to)) return false;
  if (from === "snapshotting") return to === settledPhase(prev);
  if (to === "snapshotting") return settledPhase(next) === from && Boolean(next.transitionImage);
  if (to === "resuming") return next.state === "paused" && next.onDisk === true;
  return true;
}

/**
 * A spawn blocks the event loop until the child has exec'd: ~0.25 ms with the addon's fork-free
 * spawn, several ms when Node forks the daemon, plus the Start's own preparation. Without a gate,
 * a burst of Starts whose preparation finishes together spawns back to back in one turn of the
 * loop and stalls every other request for the whole burst. Callers of `spawnTurn()` spawn one
 * after another within a turn only until SPAWN_BUDGET_MS is used, then wait for the next turn,
 * so the I/O of other requests (a Stat, the output of running processes) runs in between: a
 * burst costs other requests at most one budget of delay per turn.
 */
export const SPAWN_BUDGET_MS = 4;

/**
 * The gate itself, on a clock of its own (`now`, in ms: performance.now for the daemon; a test
 * gives one it moves by hand). Turns of the loop are the loop's own: a turn closes at the next
 * check phase (setImmediate).
 */
export class SpawnGate {
  private readonly waiting: (() => void)[] = [];
  private scheduled = false;
  // Spawns granted since the loop's last check phase share one budget, counted from turnStart.
  private turnOpen = false;
  private turnStart = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * Resolves when this caller may spawn (spawn synchronously right after it resolves). The first
   * caller of a turn of the loop goes at once (a lone Start pays no extra turn, however soon it
   * follows the last one); callers behind it in the same turn go on until the budget is used,
   * then wait for the next turn.
   */
  turn(): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      if (this.scheduled) return;
      this.scheduled = true;
      if (!this.turnOpen || this.now() - this.turnStart < SPAWN_BUDGET_MS) queueMicrotask(this.grant);
      else setImmediate(this.grant);
    });
  }

  private openTurn(): void {
    if (this.turnOpen) return;
    this.turnOpen = true;
    this.turnStart = this.now();
    setImmediate(() => (this.turnOpen = false));
  }

  // Lets the next caller spawn; queued as a microtask behind the previous caller's resumption,
  // it runs once that caller's (synchronous) spawn is done.
  private readonly grant = (): void => {
    const next = this.waiting.shift();
    if (!next) {
      this.scheduled = false;
      return;
    }
    this.openTurn();
    next();
    queueMicrotask(() => {
      if (this.waiting.length === 0) this.scheduled = false;
      else if (this.now() - this.turnStart < SPAWN_BUDGET_MS) this.grant();
      else setImmediate(this.grant);
    });
  };
}

const gate = new SpawnGate();

/** The daemon's gate (see SpawnGate.turn): resolves when this caller may spawn. */
export function spawnTurn(): Promise<void> {
  return gate.turn();
}

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

const waiting: (() => void)[] = [];
let scheduled = false;
// Spawns granted since the loop's last check phase share one budget, counted from turnStart.
let turnOpen = false;
let turnStart = 0;

/**
 * Resolves when this caller may spawn (spawn synchronously right after it resolves). The first
 * caller of a turn of the loop goes at once (a lone Start pays no extra turn, however soon it
 * follows the last one); callers behind it in the same turn go on until the budget is used,
 * then wait for the next turn.
 */
export function spawnTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (scheduled) return;
    scheduled = true;
    if (!turnOpen || performance.now() - turnStart < SPAWN_BUDGET_MS) queueMicrotask(grant);
    else setImmediate(grant);
  });
}

function openTurn(): void {
  if (turnOpen) return;
  turnOpen = true;
  turnStart = performance.now();
  setImmediate(() => (turnOpen = false));
}

// Lets the next caller spawn; queued as a microtask behind the previous caller's resumption,
// it runs once that caller's (synchronous) spawn is done.
function grant(): void {
  const next = waiting.shift();
  if (!next) {
    scheduled = false;
    return;
  }
  openTurn();
  next();
  queueMicrotask(() => {
    if (waiting.length === 0) scheduled = false;
    else if (performance.now() - turnStart < SPAWN_BUDGET_MS) grant();
    else setImmediate(grant);
  });
}

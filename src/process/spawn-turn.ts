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
let turnStart = 0;
let lastSpawnEnd = -Infinity;

/**
 * Resolves when this caller may spawn (spawn synchronously right after it resolves). When no
 * spawn ran for a budget's length, the first caller goes at once (a lone Start pays no extra
 * turn of the loop); callers arriving behind it are gated as above.
 */
export function spawnTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (scheduled) return;
    scheduled = true;
    if (performance.now() - lastSpawnEnd > SPAWN_BUDGET_MS) queueMicrotask(release);
    else setImmediate(release);
  });
}

function release(): void {
  turnStart = performance.now();
  grant();
}

// Lets the next caller spawn; queued as a microtask behind the previous caller's resumption,
// it runs once that caller's (synchronous) spawn is done.
function grant(): void {
  const next = waiting.shift();
  if (!next) {
    scheduled = false;
    return;
  }
  next();
  queueMicrotask(() => {
    lastSpawnEnd = performance.now();
    if (waiting.length === 0) scheduled = false;
    else if (lastSpawnEnd - turnStart < SPAWN_BUDGET_MS) grant();
    else setImmediate(release);
  });
}

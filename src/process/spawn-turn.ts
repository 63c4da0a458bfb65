/**
 * Spawning blocks the event loop until the child has exec'd (libuv forks and waits on a
 * pipe), several ms from a daemon-sized process and more on a loaded machine. Without a
 * gate, a burst of Starts whose preparation finishes together spawns back to back in one
 * turn of the loop and stalls every other request for the whole burst. Callers of
 * `spawnTurn()` spawn one after another within a turn only until its budget is used, then
 * wait for the next turn, so the I/O of other requests runs in between. The budget is
 * SPAWN_BUDGET_MS, or as long as the loop spent on other work since the last spawn if that
 * is longer (up to MAX_BUDGET_MS): spawning then takes at most about half of a busy loop, so
 * a burst of Starts neither stalls other requests for long nor crawls behind them.
 */
export const SPAWN_BUDGET_MS = 8;

/** The most a turn may spend spawning however busy the rest of the loop is. */
const MAX_BUDGET_MS = 50;

const waiting: (() => void)[] = [];
let scheduled = false;
let turnStart = 0;
let budget = SPAWN_BUDGET_MS;
let lastSpawnEnd = -Infinity;
let carryOver = false;

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
  // Continuing a burst: match the time the loop spent on other work since the last spawn.
  budget = carryOver ? Math.min(MAX_BUDGET_MS, Math.max(SPAWN_BUDGET_MS, turnStart - lastSpawnEnd)) : SPAWN_BUDGET_MS;
  carryOver = false;
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
    else if (lastSpawnEnd - turnStart < budget) grant();
    else {
      carryOver = true;
      setImmediate(release);
    }
  });
}

/**
 * Spawning blocks the event loop until the child has exec'd (libuv forks and waits on a
 * pipe), several ms from a daemon-sized process and more on a loaded machine. Without a
 * gate, a burst of Starts whose preparation finishes together spawns back to back in one
 * turn of the loop and stalls every other request for the whole burst. Each caller of
 * `spawnTurn()` gets its own turn (one spawn per check phase), so the I/O of other requests
 * runs between two spawns.
 */
const waiting: (() => void)[] = [];
let scheduled = false;

/** Resolves when it is this caller's turn to spawn (at most one turn per loop iteration). */
export function spawnTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (!scheduled) {
      scheduled = true;
      setImmediate(release);
    }
  });
}

function release(): void {
  const next = waiting.shift();
  if (waiting.length > 0) setImmediate(release);
  else scheduled = false;
  next?.();
}

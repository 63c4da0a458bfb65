/**
 * How long one turn of the event loop may spend admitting requests (Start, WatchDir) before the
 * rest wait for the next turn (spawns have a gate of their own: process/spawn-turn.ts).
 */
export const ADMIT_BUDGET_MS = 2;

/** Runs a request's handling now or in a later turn of the event loop. */
export type Admit = (run: () => void) => void;

/**
 * Admission of the requests that are costly to prepare (a Start: ~0.5 ms of parsing, checks and
 * planning each before its spawn; a WatchDir sets up a recursive watch). A burst of them reaches
 * the daemon in one poll of the loop (200 Starts from one client arrive together), and handled
 * as they arrive they would run back to back for a hundred milliseconds or more while every
 * other request (a Stat, the output of running processes) waits behind them.
 *
 * Within a turn, requests are run as they come until `budgetMs` has passed since the turn's
 * first one; the rest queue, in order, and are run in the following turns, `budgetMs` of them
 * per turn, with the loop's other I/O between. Arrivals never overtake the queue. A lone
 * request is run at once.
 */
export function createAdmission(budgetMs = ADMIT_BUDGET_MS): Admit {
  const queue: (() => void)[] = [];
  // When this turn's first admission ran; undefined once the turn has ended.
  let turnStart: number | undefined;
  let draining = false;

  // Scheduled whenever turnStart is set: from the poll phase it runs at this turn's check
  // phase; from drain (itself in the check phase), at the next turn's.
  const endTurn = (): void => {
    turnStart = undefined;
  };
  const startTurn = (now: number): void => {
    turnStart = now;
    setImmediate(endTurn);
  };

  const drain = (): void => {
    const t0 = performance.now();
    startTurn(t0);
    try {
      do queue.shift()!();
      while (queue.length > 0 && performance.now() - t0 < budgetMs);
    } finally {
      if (queue.length > 0) setImmediate(drain);
      else draining = false;
    }
  };

  return (run) => {
    const now = performance.now();
    if (queue.length === 0) {
      if (turnStart === undefined) {
        startTurn(now);
        return run();
      }
      if (now - turnStart < budgetMs) return run();
    }
    queue.push(run);
    if (!draining) {
      draining = true;
      setImmediate(drain);
    }
  };
}

import type { Logger } from "../log.js";
import type { SandboxRow } from "../store/sandboxes.js";
import type { Store } from "../store/store.js";
import type { createSerializer } from "../serial.js";

/**
 * One pass of the evictor: every running sandbox past its end is paused (autoPause) or killed,
 * each under its own serial lane and checked again there, so a timeout extended meanwhile wins.
 */
export async function evictExpired(p: {
  store: Store;
  serial: ReturnType<typeof createSerializer>;
  log: Logger;
  pause: (row: SandboxRow) => Promise<void>;
  kill: (row: SandboxRow) => Promise<void>;
}): Promise<void> {
  const now = Date.now();
  for (const row of p.store.sandboxes.all()) {
    if (row.state !== "running" || Date.parse(row.endAt) > now) continue;
    await p
      .serial(row.id, async () => {
        const cur = p.store.sandboxes.get(row.id);
        if (!cur || cur.state !== "running" || Date.parse(cur.endAt) > Date.now()) return;
        if (cur.autoPause) await p.pause(cur);
        else await p.kill(cur);
        p.log.info({ sandboxID: cur.id, action: cur.autoPause ? "paused" : "killed" }, "sandbox timed out");
      })
      .catch((err: Error) => p.log.error({ sandboxID: row.id, err: err.message }, "evicting a sandbox failed"));
  }
}

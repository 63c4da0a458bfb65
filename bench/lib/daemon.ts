import { startDaemon, type Daemon } from "../../test/helpers/daemon.js";
import { clients, type Clients } from "../../test/helpers/clients.js";

export { ENVD_BIN, ROOT } from "../../test/helpers/daemon.js";

let extraEnv: Record<string, string> = {};

/** Environment added to every daemon the bench starts (e.g. NODE_OPTIONS=--cpu-prof for profiling). */
export function setDaemonEnv(env: Record<string, string>): void {
  extraEnv = env;
}

/** The environment added to daemons by setDaemonEnv. */
export function daemonEnv(): Record<string, string> {
  return extraEnv;
}

/** A daemon started for one scenario plus connect-node clients pointed at it. */
export interface BenchDaemon {
  daemon: Daemon;
  c: Clients;
}

/**
 * Starts a fresh daemon (default flags of the test helper), runs `fn`, and always stops it,
 * so one scenario's leftovers never skew the next one's memory or latency.
 */
export async function withDaemon<T>(fn: (d: BenchDaemon) => Promise<T>, args: string[] = []): Promise<T> {
  const daemon = await startDaemon({ args, env: extraEnv });
  try {
    return await fn({ daemon, c: clients(daemon.url) });
  } finally {
    await daemon.stop();
  }
}

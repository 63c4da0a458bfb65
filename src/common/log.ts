import { pino, type Logger } from "pino";

export type { Logger };

/** Log lines waiting for a stuck output beyond this are dropped rather than held in memory. */
const MAX_BUFFERED_LOG_BYTES = 16 * 1024 * 1024;

/**
 * The JSON-lines logger both programs use: `{level, time, logger, msg, …}` on one descriptor.
 * Lines are written asynchronously (a synchronous write per request cost ~0.2 ms of the event
 * loop each, and a full pipe stalled every request); what is still buffered is flushed
 * synchronously when the process exits. `redact` paths are removed from every line.
 */
export function createJsonLogger(opts: { level: string; fd: 1 | 2; name: string; redact?: string[] }): Logger {
  const dest = pino.destination({ dest: opts.fd, sync: false, maxLength: MAX_BUFFERED_LOG_BYTES });
  process.once("exit", () => {
    try {
      dest.flushSync();
    } catch {
      // the descriptor is gone or a write is still in flight: nothing more can be saved
    }
  });
  return pino(
    {
      level: opts.level,
      base: { logger: opts.name },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      ...(opts.redact ? { redact: { paths: opts.redact, remove: true } } : {}),
    },
    dest,
  );
}

import { pino, type Logger } from "pino";

export type { Logger };

/** Log lines waiting for a stuck stdout beyond this are dropped rather than held in memory. */
const MAX_BUFFERED_LOG_BYTES = 16 * 1024 * 1024;

/**
 * JSON-lines logger on stdout. Callers must never pass tokens, signatures, env values or file
 * contents. Lines are written asynchronously: a synchronous write per request cost ~0.2 ms
 * of the event loop each, and a full stdout pipe (a busy journal reader) stalled every request.
 * What is still buffered is flushed synchronously when the process exits.
 */
export function createLogger(level: string): Logger {
  const dest = pino.destination({ dest: 1, sync: false, maxLength: MAX_BUFFERED_LOG_BYTES });
  process.once("exit", () => {
    try {
      dest.flushSync();
    } catch {
      // stdout is gone or a write is still in flight: nothing more can be saved
    }
  });
  return pino(
    {
      level,
      base: { logger: "envd" },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    dest,
  );
}

import { pino, type Logger } from "pino";

export type { Logger };

/** Log lines waiting for a stuck stderr beyond this are dropped rather than held in memory. */
const MAX_BUFFERED_LOG_BYTES = 16 * 1024 * 1024;

/**
 * JSON-lines logger on stderr (stdout carries only the lines a user copies into their shell).
 * Callers never pass API keys, access tokens, traffic tokens or request bodies. Writes are
 * asynchronous and flushed synchronously at exit.
 */
export function createLogger(level: string): Logger {
  const dest = pino.destination({ dest: 2, sync: false, maxLength: MAX_BUFFERED_LOG_BYTES });
  process.once("exit", () => {
    try {
      dest.flushSync();
    } catch {
      // stderr is gone or a write is still in flight: nothing more can be saved
    }
  });
  return pino(
    {
      level,
      base: { logger: "sandboxd" },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: ["apiKey", "token", "*.apiKey", "*.token", "headers.authorization", "headers[\"x-api-key\"]"], remove: true },
    },
    dest,
  );
}

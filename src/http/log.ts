import { pino, type Logger } from "pino";

export type { Logger };

/** JSON-lines logger on stdout. Callers must never pass tokens, signatures, env values or file contents. */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { logger: "envd" },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  });
}

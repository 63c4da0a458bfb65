import { createJsonLogger, type Logger } from "../../common/log.js";

export type { Logger };

/** envd's logger: JSON lines on stdout. Callers must never pass tokens, signatures, env values or file contents. */
export function createLogger(level: string): Logger {
  return createJsonLogger({ level, fd: 1, name: "envd" });
}

import { createJsonLogger, type Logger } from "../common/log.js";

export type { Logger };

/**
 * sandboxd's logger: JSON lines on stderr (stdout carries only the lines a user copies into their
 * shell). Callers never pass API keys, access tokens, traffic tokens or request bodies; the
 * usual key and token fields are removed if one slips through.
 */
export function createLogger(level: string): Logger {
  return createJsonLogger({
    level,
    fd: 2,
    name: "sandboxd",
    redact: ["apiKey", "token", "*.apiKey", "*.token", "headers.authorization", 'headers["x-api-key"]'],
  });
}

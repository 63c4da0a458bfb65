import { startupDone } from "./startup-flags.js";
import { parseConfig } from "./config.js";
import { startApp } from "./app.js";
import { envdVersion } from "./version.js";
import { startMemoryTrimmer } from "./system/memory.js";

/** Entry point: config from argv/env → start → stop gracefully on SIGTERM/SIGINT within 5 s. */
async function main(): Promise<void> {
  const version = envdVersion();
  const parsed = parseConfig(process.argv.slice(2), process.env, version);
  if ("print" in parsed) {
    (parsed.exitCode === 0 ? process.stdout : process.stderr).write(parsed.print);
    process.exit(parsed.exitCode);
  }
  const app = await startApp(parsed.config, version);
  startupDone();
  startMemoryTrimmer(app.log);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, "shutting down");
    const hard = setTimeout(() => process.exit(0), 4800);
    hard.unref();
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGPIPE", () => undefined);
  process.on("unhandledRejection", (err) => app.log.error({ err: String(err) }, "unhandled rejection"));
}

main().catch((err) => {
  process.stderr.write(`envd: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});

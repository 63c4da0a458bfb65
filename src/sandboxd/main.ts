import { runAdmin } from "./admin/cli.js";
import { parseConfig } from "./config.js";
import { sandboxdVersion } from "./cli.js";
import { startApp } from "./app.js";
import { createLogger } from "./log.js";

/** Entry point: flags → start → on SIGTERM/SIGINT stop accepting and exit 0, leaving sandboxes running. */
async function main(): Promise<void> {
  const version = sandboxdVersion();
  const command = process.argv[2];
  if (command === "keys" || command === "teams") {
    const r = runAdmin(process.argv.slice(2), process.env);
    process.stdout.write(r.stdout);
    process.stderr.write(r.stderr);
    // Not process.exit: a piped stdout gets all of its output before the process ends.
    process.exitCode = r.exitCode;
    return;
  }
  if (process.argv[2] === "template") {
    const { templateCli } = await import("./templates/cli.js");
    process.exit(await templateCli(process.argv.slice(3), process.env, process.stdout, process.stderr));
  }
  const parsed = parseConfig(process.argv.slice(2), process.env, version);
  if ("print" in parsed) {
    (parsed.exitCode === 0 ? process.stdout : process.stderr).write(parsed.print);
    process.exit(parsed.exitCode);
  }
  const log = createLogger(parsed.config.logLevel);
  process.on("SIGPIPE", () => undefined);
  process.on("unhandledRejection", (err) => log.error({ err: String((err as Error)?.stack ?? err) }, "unhandled rejection"));
  let app: Awaited<ReturnType<typeof startApp>> | undefined;
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down; sandboxes keep running");
    const hard = setTimeout(() => process.exit(0), 8000);
    hard.unref();
    (app ? app.close() : Promise.resolve()).then(
      () => process.exit(0),
      (err) => {
        log.error({ err: String(err) }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  try {
    app = await startApp(parsed.config, version, log);
  } catch (err) {
    log.fatal({ err: String((err as Error)?.message ?? err) }, "sandboxd could not start");
    process.stderr.write(`sandboxd: ${(err as Error)?.message ?? String(err)}\n`);
    process.exit(1);
  }
  if (stopping) await app.close();
  else process.stdout.write(app.userLines);
}

void main();

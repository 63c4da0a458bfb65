import { runAdmin } from "./admin/cli.js";
import { parseConfig } from "./config.js";
import { resolveEnvdDir, sandboxdVersion } from "./cli.js";
import { startApp } from "./app.js";
import { createLogger } from "./log.js";
import { checkHost, describeMissing, HOST_UNFIT_EXIT } from "./host/setup/prereqs.js";
import { cachedBaseRootfs } from "./images/base.js";
import { startQuietCollector } from "./host/memory-quiet.js";
import { relaunchWithMemorySettings } from "./host/memory-settings.js";

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
  if (command === "setup") {
    // setup takes serve's flags (data and cache dirs, domain: what the checks look at) and --print.
    const rest = process.argv.slice(3);
    const printOnly = rest.includes("--print");
    const parsedSetup = parseConfig(["serve", ...rest.filter((a) => a !== "--print")], process.env, version);
    if ("print" in parsedSetup) {
      (parsedSetup.exitCode === 0 ? process.stdout : process.stderr).write(parsedSetup.print);
      process.exit(parsedSetup.exitCode);
    }
    const { runSetup } = await import("./host/setup/setup.js");
    const c = parsedSetup.config;
    process.exitCode = runSetup({ dataDir: c.dataDir, cacheDir: c.cacheDir, domain: c.domain, baseBuilt: !!cachedBaseRootfs(c.cacheDir), printOnly }, { out: process.stdout, err: process.stderr });
    return;
  }
  const parsed = parseConfig(process.argv.slice(2), process.env, version);
  if ("print" in parsed) {
    (parsed.exitCode === 0 ? process.stdout : process.stderr).write(parsed.print);
    process.exit(parsed.exitCode);
  }
  // A serve started without its memory settings (V8 flags, glibc arenas) becomes one that has them.
  relaunchWithMemorySettings();
  // Every host prerequisite is checked before anything is made or listened on: a host that lacks
  // one gets the whole list and the apt-get line at once, not a failure per missing tool later.
  let envdDir: string | undefined;
  try {
    envdDir = resolveEnvdDir(parsed.config.envdDir, version);
  } catch {
    // startApp says what is missing
  }
  const missing = checkHost({ dataDir: parsed.config.dataDir, cacheDir: parsed.config.cacheDir, domain: parsed.config.domain, baseBuilt: !!cachedBaseRootfs(parsed.config.cacheDir), envdDir });
  if (missing.length > 0) {
    process.stderr.write(describeMissing(missing));
    process.exit(HOST_UNFIT_EXIT);
  }
  const log = createLogger(parsed.config.logLevel);
  // fetch's resource timings (one per call to a sandbox's envd) are never read: none are kept
  performance.setResourceTimingBufferSize(0);
  process.on("SIGPIPE", () => undefined);
  // A safety net only: every request path answers its own errors, and a throw that still gets
  // here must cost the one operation it came from, not every tenant's API, proxy and creates.
  process.on("uncaughtException", (err, origin) => log.error({ origin, ...errorFields(err) }, "last-resort handler: uncaught exception; sandboxd keeps serving"));
  process.on("unhandledRejection", (err) => log.error({ origin: "unhandledRejection", ...errorFields(err) }, "last-resort handler: unhandled rejection; sandboxd keeps serving"));
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
  else {
    process.stdout.write(app.userLines);
    startQuietCollector({ onCollect: (before, after) => log.debug({ rssMiB: Math.round(before / 2 ** 20), afterMiB: Math.round(after / 2 ** 20) }, "quiet: gave memory back") });
  }
}

/**
 * What the last-resort handler logs of an error: its class, code, message (cut short) and stack
 * frames, never the values it carried (a request's headers, tokens or bodies are not read here).
 */
function errorFields(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { err: typeof err, value: typeof err === "string" ? err.slice(0, 200) : undefined };
  const frames = (err.stack ?? "").split("\n").filter((l) => l.trimStart().startsWith("at ")).slice(0, 12).map((l) => l.trim());
  return { err: err.name, code: (err as NodeJS.ErrnoException).code, message: err.message.slice(0, 300), stack: frames };
}

void main();

import { startupDone } from "./startup-flags.js";
import { parseConfig } from "./config.js";
import { envdVersion } from "./version.js";
import { createLogger } from "./http/log.js";
import { installHeaders } from "./http/headers.js";
import { EarlyGate } from "./http/early.js";
import { Server } from "./http/server.js";
import { prepareRest } from "./load-rest.js";
import type { App } from "./app.js";

/**
 * Entry point: config from argv/env → listen → load the rest → stop gracefully on SIGTERM/SIGINT
 * within 5 s. Only the HTTP server, the config and the logger load before envd listens; while the
 * rest loads, a plain GET /health is answered and other requests wait (http/early.ts).
 */
async function main(): Promise<void> {
  const t0 = performance.now();
  installHeaders();
  const version = envdVersion();
  const parsed = parseConfig(process.argv.slice(2), process.env, version);
  if ("print" in parsed) {
    (parsed.exitCode === 0 ? process.stdout : process.stderr).write(parsed.print);
    process.exit(parsed.exitCode);
  }
  const { config } = parsed;
  const log = createLogger(config.logLevel);
  const loadRest = prepareRest();
  let app: App | undefined;
  let stopping = false;
  const gate = new EarlyGate(log, () => {
    if (stopping) return;
    const t1 = performance.now();
    loadRest()
      .then(async ({ rest, from, codeCache }) => {
        const loadedMs = performance.now() - t1;
        app = await rest.startApp(config, version, { server, gate, log });
        startupDone();
        log.info({ from, codeCache, loadMs: Math.round(loadedMs), readyMs: Math.round(performance.now() - t0) }, "loaded");
        // An envd started ahead of need (a warm pool's) gets a token at its claim: the checks it
        // needs are loaded on its first quiet second, not while the claim waits.
        rest.startMemoryTrimmer(log, undefined, rest.prepareTokenChecks);
      })
      .catch(fail);
  });
  const server = new Server(gate.handle, log);
  const port = await server.listen(config.port, config.host);
  log.info({ port, version, defaultUser: config.defaultUser }, "listening");
  gate.armed();

  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    const hard = setTimeout(() => process.exit(0), 4800);
    hard.unref();
    (app ? app.close() : server.close(0)).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGPIPE", () => undefined);
  process.on("unhandledRejection", (err) => log.error({ err: String(err) }, "unhandled rejection"));
}

function fail(err: unknown): never {
  process.stderr.write(`envd: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
}

main().catch(fail);

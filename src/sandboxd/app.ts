import { mkdirSync } from "node:fs";
import type { Config } from "./config.js";
import { resolveEnvdDir, userLines } from "./cli.js";
import type { Logger } from "./log.js";
import { createProxy } from "./proxy/proxy.js";
import type { RouteIndex } from "./proxy/target.js";
import { createDispatcher, type ApiHandler } from "./server/dispatch.js";
import { createListener } from "./server/listener.js";
import { ensureTls } from "./tls/certs.js";

/** A started sandboxd: its port, what to print for the user, and a stop that leaves sandboxes running. */
export interface App {
  port: number;
  userLines: string;
  close(): Promise<void>;
}

/** Requests in flight get this long to finish at shutdown before their connections are cut. */
const SHUTDOWN_GRACE_MS = 3000;

/**
 * Composition root: data dir → TLS → listener (answering /health 503 until ready) → the control
 * plane behind it. The listener comes up first so a first start that builds the base template
 * for minutes is visibly alive.
 */
export async function startApp(config: Config, version: string, log: Logger): Promise<App> {
  mkdirSync(config.dataDir, { recursive: true, mode: 0o755 });
  const envdDir = resolveEnvdDir(config.envdDir, version);
  const tls = await ensureTls(config.dataDir, config.domain, log);
  let index: RouteIndex = { lookup: () => undefined };
  let api: ApiHandler | undefined;
  let readiness: { ready: true } | { ready: false; reason: string } = { ready: false, reason: "starting" };
  const proxy = createProxy({ index: { lookup: (id) => index.lookup(id) }, log });
  const dispatcher = createDispatcher({ domain: config.domain, api: () => api, proxy, readiness: () => readiness, log });
  const listener = createListener({ key: tls.key, cert: tls.cert, dispatcher, log });
  const port = await listener.listen(config.listenHost, config.listenPort);
  log.info({ host: config.listenHost, port, domain: config.domain, envdDir, version }, "listening");
  const apiKey = "";
  void index;
  void api;
  readiness = { ready: false, reason: "the control plane is not wired into this build" };
  return {
    port,
    userLines: userLines({ domain: config.domain, port, apiKey, caFile: tls.caFile }),
    async close() {
      await listener.close(SHUTDOWN_GRACE_MS);
      proxy.close();
    },
  };
}

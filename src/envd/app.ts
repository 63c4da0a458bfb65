import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setMaxListeners } from "node:events";
import { Code, ConnectError } from "@connectrpc/connect";
import { hostTokenHash, type Config } from "./config.js";
import type { Deps } from "./deps.js";
import { UserDb } from "./auth/users.js";
import { SandboxState } from "./sandbox/state.js";
import type { Logger } from "./http/log.js";
import type { EarlyGate } from "./http/early.js";
import { serviceEntry } from "./http/fast-unary.js";
import { serializedFrames } from "./http/framed-stream.js";
import { createHandler } from "./http/handler.js";
import type { Server } from "./http/server.js";
import { Filesystem } from "./gen/filesystem/filesystem_pb.js";
import { Process } from "./gen/process/process_pb.js";
import { createFilesystemService } from "./filesystem/service.js";
import { createProcessService } from "./process/service.js";
import { processEventFrame } from "./process/frames.js";
import { filesRoutes } from "./files/routes.js";
import { sandboxRoutes } from "./sandbox/routes.js";
import { initRoute } from "./sandbox/init.js";
import { MetricsSampler } from "./sandbox/metrics.js";
import { createClock } from "./sandbox/clock.js";
import { CaInstaller } from "./sandbox/ca.js";
import { TokenHashStore } from "./sandbox/token-store.js";


/** A running daemon: how to stop it. */
export interface App {
  /** Graceful stop: refuse new connections, end open streams cleanly, release resources. */
  close(): Promise<void>;
}

/** What main.ts has started before the rest of the daemon loads: the listening server, its gate and the logger. */
export interface Early {
  readonly server: Server;
  readonly gate: EarlyGate;
  readonly log: Logger;
}

/**
 * Composition root: builds state, services and routes once, then opens the gate, handing the
 * requests that waited to the full handler.
 */
export async function startApp(config: Config, version: string, { server, gate, log }: Early): Promise<App> {
  const state = new SandboxState(config.defaultUser, config.defaultWorkdir);
  const deps: Deps = { config, users: new UserDb(), state, log };
  initRunDir(config.runDir, deps);
  const tokens = new TokenHashStore(join(config.runDir, "envd"));
  closeUntilInit(deps, tokens);

  const metrics = new MetricsSampler();
  try {
    metrics.prime();
  } catch {
    // the first /metrics then has no earlier sample to compare CPU time with
  }
  const fs = createFilesystemService(deps);
  const proc = createProcessService(deps);
  const shutdown = new AbortController();
  // Every open RPC links its own signal to this one: thousands of listeners are expected.
  setMaxListeners(0, shutdown.signal);
  const handler = createHandler({
    deps,
    shutdownSignal: shutdown.signal,
    firstOperationId: gate.operationsUsed + 1,
    routes: [
      ...sandboxRoutes(deps, metrics),
      initRoute(deps, { clock: createClock(config.clock), ca: new CaInstaller(config.caBundlePath, config.caCertPath), version, tokens }),
      ...filesRoutes(deps),
    ],
    services: [
      // WatchDir's events leave as connect-es serializes them, through the stream fast path.
      { ...serviceEntry(Filesystem, fs), frames: serializedFrames },
      // Output streams leave as hand-written frames (zero-copy binary, one base64 pass for JSON).
      // Start and Connect (what the SDKs stream commands through) skip connect-es's layers.
      { ...serviceEntry(Process, proc), frames: processEventFrame, direct: proc.streams },
    ],
  });
  gate.open(handler);
  return {
    async close() {
      // Open streams end with a proper end-of-stream frame carrying this code and message.
      shutdown.abort(new ConnectError("envd is shutting down", Code.Unavailable));
      await Promise.all([server.close(4000), proc.close(), closeIfAble(fs)]);
    },
  };
}

async function closeIfAble(service: object): Promise<void> {
  const close = (service as { close?: () => Promise<void> }).close;
  if (typeof close === "function") await close.call(service);
}

/** The SHA-512 of the empty string: a host hash that authorises running without a token. */
const NO_TOKEN_HASH =
  "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e";

/**
 * Decides at start whether a token may be expected, and if so keeps every request but /health
 * and /init out until /init succeeds: a previous run of the daemon had a token (its hash is
 * recorded), the record cannot be read, or the host configured a token hash.
 */
function closeUntilInit(deps: Deps, tokens: TokenHashStore): void {
  const prior = tokens.load();
  const { state, log } = deps;
  if (prior.kind === "hash") state.priorTokenHash = prior.hash;
  if (prior.kind === "unknown") {
    state.priorTokenUnknown = true;
    log.error({ dir: tokens.dir, reason: prior.reason }, "cannot tell whether a token was set: closed until /init is authorised by the host token hash");
  }
  const host = hostTokenHash(deps.config);
  state.closedUntilInit = prior.kind !== "none" || (host !== undefined && host !== NO_TOKEN_HASH);
  if (state.closedUntilInit) log.info({ reason: prior.kind === "none" ? "host token hash" : "token of a previous run" }, "closed until /init");
}

/**
 * The sandbox's identity as its host gave it: E2B's envd reads the IDs from Firecracker's MMDS; a
 * host without one (sandboxd's runc runtime) sets them in envd's own environment.
 */
const IDENTITY = ["E2B_SANDBOX_ID", "E2B_TEMPLATE_ID"] as const;

/** The run dir's identity files, written synchronously: an asynchronous write would start libuv's thread pool in an idle daemon. */
function initRunDir(runDir: string, deps: Deps): void {
  deps.state.envs.setInternal("E2B_SANDBOX", "true");
  const ids = IDENTITY.flatMap((name) => (/^[A-Za-z0-9_-]{1,64}$/.test(process.env[name] ?? "") ? [[name, process.env[name]!] as const] : []));
  for (const [name, value] of ids) deps.state.envs.setInternal(name, value);
  try {
    mkdirSync(runDir, { recursive: true, mode: 0o755 });
  } catch (err) {
    deps.log.warn({ err: String(err), runDir }, "cannot prepare run dir");
    return;
  }
  for (const [file, value] of [[".E2B_SANDBOX", "true"], ...ids.map(([name, v]) => [`.${name}`, v])]) {
    try {
      writeFileSync(join(runDir, file), value, { mode: 0o444 });
    } catch {
      // a read-only leftover from an earlier run: its content is the same
    }
  }
}

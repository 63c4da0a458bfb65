/**
 * sandboxd's one client of a sandbox's envd: /init, commands through the process stream, and
 * /metrics. envd runs inside the sandbox and sandbox root can replace it, so every call is
 * bounded in time and in the bytes it reads.
 */
import { Agent } from "node:http";
import { initEnvd } from "./init.js";
import { fetchMetrics } from "./metrics.js";
import { runStartCommand } from "./process.js";
import { runOverH2c } from "./warm-up.js";

/** Where a sandbox's envd answers, and the access token a secure sandbox's envd asks for. */
export interface EnvdAddress {
  ip: string;
  port: number;
  accessToken?: string;
}

/** What /init sets in envd: its user variables (undefined leaves them), default user and directory. */
export interface InitSettings {
  envVars?: Record<string, string>;
  defaultUser?: string;
  defaultWorkdir?: string;
}

/** Who a command runs as, and where. */
export interface RunAs {
  user: string;
  cwd?: string;
}

/** The calls sandboxd makes to one sandbox's envd. */
export interface EnvdClient {
  /** POSTs /init until envd answers 204 or `totalMs` passes; resolves with the version envd reports. */
  init(settings: InitSettings, totalMs?: number): Promise<string | undefined>;
  /**
   * Runs `bash -l -c cmd` to its end within `timeoutMs`, over h2c the way the SDK's commands
   * reach envd through the proxy; resolves with its exit code.
   */
  run(cmd: string, as: RunAs, timeoutMs: number): Promise<number>;
  /** Starts a template's start command and waits for its ready command to pass (nothing when neither is set). */
  startCommand(as: RunAs, startCmd: string | null | undefined, readyCmd: string | null | undefined): Promise<void>;
  /** One /metrics reading over this client's kept-alive connection. */
  metrics(): Promise<Record<string, unknown>>;
  /** Drops the kept-alive connection, if any. */
  close(): void;
}

/** Makes clients of sandboxes' envd (the real one; tests may give another). */
export type EnvdConnector = (addr: EnvdAddress) => EnvdClient;

/** A client of the envd at `addr` over HTTP. */
export const connectEnvd: EnvdConnector = (addr) => {
  let agent: Agent | undefined;
  const target = (as: RunAs) => ({ ip: addr.ip, port: addr.port, accessToken: addr.accessToken, user: as.user, cwd: as.cwd });
  return {
    init: (s, totalMs) => initEnvd({ ip: addr.ip, port: addr.port, accessToken: addr.accessToken, ...s }, totalMs),
    run: (cmd, as, timeoutMs) => runOverH2c(target(as), cmd, timeoutMs),
    startCommand: (as, startCmd, readyCmd) => runStartCommand(target(as), startCmd, readyCmd),
    metrics: () => fetchMetrics((agent ??= new Agent({ keepAlive: true, maxSockets: 1 })), addr.ip, addr.port, addr.accessToken),
    close: () => agent?.destroy(),
  };
};

import type { Config } from "./config.js";
import type { UserDb } from "./auth/users.js";
import type { SandboxState } from "./sandbox/state.js";
import type { Logger } from "./http/log.js";

/** What every service and route is built with: created once in app.ts and passed in explicitly. */
export interface Deps {
  readonly config: Config;
  readonly users: UserDb;
  readonly state: SandboxState;
  readonly log: Logger;
}

// sandbox/ is the state of the sandbox envd serves, as the host sets it with /init and reads it
// back: the access token (and its hash kept across restarts), environment variables, the CA
// bundle, the events host in /etc/hosts, the clock, and the /health, /envs and /metrics answers.
//
// This file: the sandbox-wide state object every request reads.
import { AccessToken } from "../auth/token.js";
import { EnvStore } from "./env-store.js";

/** The mutable sandbox-wide state that /init changes and every request reads. */
export class SandboxState {
  readonly token = new AccessToken();
  readonly envs = new EnvStore();
  /** Nanoseconds of the newest /init timestamp applied (ordering guard). */
  lastInitNs = -1n;
  /**
   * True from a start at which a token may be expected (a previous run had one, its record is
   * unreadable, or the host configured a token hash) until /init succeeds: meanwhile only
   * GET /health and POST /init are served.
   */
  closedUntilInit = false;
  /** SHA-512 of the token a previous run had: /init presenting that token is authorised. */
  priorTokenHash: string | undefined;
  /** A previous run's token cannot be known (its record is unreadable): only the host hash authorises /init. */
  priorTokenUnknown = false;

  constructor(
    public defaultUser: string,
    public defaultWorkdir: string | undefined,
  ) {}
}

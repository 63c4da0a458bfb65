import { AccessToken } from "../auth/token.js";
import { EnvStore } from "./env-store.js";

/** The mutable sandbox-wide state that /init changes and every request reads. */
export class SandboxState {
  readonly token = new AccessToken();
  readonly envs = new EnvStore();
  /** Nanoseconds of the newest /init timestamp applied (ordering guard). */
  lastInitNs = -1n;

  constructor(
    public defaultUser: string,
    public defaultWorkdir: string | undefined,
  ) {}
}

// The environment variables every process started in the sandbox gets.
/** Names of the variables envd itself owns; /init envVars can neither set nor delete them. */
export const INTERNAL_ENV_NAMES = new Set(["E2B_SANDBOX", "E2B_SANDBOX_ID", "E2B_TEMPLATE_ID", "E2B_EVENTS_ADDRESS"]);

/** The variables injected into every process: /init's user set plus envd's internal ones. */
export class EnvStore {
  private user = new Map<string, string>();
  private internal = new Map<string, string>();

  /** Sets an internal variable (E2B_SANDBOX, ...). */
  setInternal(name: string, value: string): void {
    this.internal.set(name, value);
  }

  /** Replaces the whole user set (keys absent from `vars` are removed); internal names are ignored. */
  replaceUser(vars: Record<string, string>): void {
    this.user = new Map(Object.entries(vars).filter(([k]) => !INTERNAL_ENV_NAMES.has(k)));
  }

  /** Every injected variable as a plain object (internal ones win on a clash). */
  all(): Record<string, string> {
    return { ...Object.fromEntries(this.user), ...Object.fromEntries(this.internal) };
  }
}

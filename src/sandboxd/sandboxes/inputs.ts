/** What POST /sandboxes asks for, after the API checked the types. */
export interface CreateInput {
  templateID: string;
  /** Seconds until the sandbox times out (the endpoint supplies its default). */
  timeout: number;
  autoPause?: boolean;
  /** A timeout's pause keeps memory (true, the default: a freeze) or only the disk (false). */
  autoPauseMemory?: boolean;
  /** Resume the sandbox when traffic reaches it while paused (needs autoPause). */
  autoResume?: boolean;
  secure: boolean;
  allowInternetAccess?: boolean;
  network?: Record<string, unknown>;
  metadata?: Record<string, string>;
  envVars?: Record<string, string>;
}

/** What PUT /sandboxes/{id}/network asks for: the new rules whole (an absent field clears that rule). */
export interface NetworkUpdate {
  allowOut?: string[];
  denyOut?: string[];
  rules?: Record<string, unknown>;
  allowInternetAccess?: boolean;
}

/** The v2 list query after parsing. */
export interface ListQuery {
  states: ("running" | "paused")[];
  metadata: [string, string][];
  order: "asc" | "desc";
  limit: number;
  nextToken?: string;
  startedAfter?: number;
  template?: string;
}

import { egressRulesError } from "../network/policy.js";
import { ApiError } from "../sandboxes/errors.js";
import type { CreateInput } from "../sandboxes/inputs.js";
import { invalid, objectBody, optBool, optInt, optString, optStringList, optStringMap } from "./validate.js";

/** Checks the allow and deny lists as E2B does (400 with its message). */
export function checkEgressRules(allowOut: string[] | undefined, denyOut: string[] | undefined): void {
  const why = egressRulesError(allowOut, denyOut);
  if (why) throw new ApiError(400, why);
}

/** Checks the `network` object's types and its egress rules; the fields are stored as sent. */
function network(o: Record<string, unknown>): Record<string, unknown> | undefined {
  const v = o.network;
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v)) throw invalid(`field "network" must be an object`);
  const n = v as Record<string, unknown>;
  optBool(n, "allowPublicTraffic");
  const allowOut = optStringList(n, "allowOut", "network.allowOut");
  const denyOut = optStringList(n, "denyOut", "network.denyOut");
  optString(n, "maskRequestHost");
  if (n.rules !== undefined && (n.rules === null || typeof n.rules !== "object" || Array.isArray(n.rules))) throw invalid(`field "network.rules" must be an object`);
  if (n.egressProxy !== undefined && n.egressProxy !== null) throw new ApiError(403, "egress proxy is not enabled for this team");
  checkEgressRules(allowOut, denyOut);
  return { ...n };
}

/** What a create endpoint supplies for the fields a client leaves out. */
export interface CreateDefaults {
  /** `secure`: false on /sandboxes (the spec's default), true on /v2/sandboxes. */
  secure: boolean;
  /** `timeout` in seconds: 15 on /sandboxes, 300 on /v2/sandboxes (SDKs from 2.51 send none). */
  timeoutS: number;
}

/** The v1 endpoint's defaults, as E2B's spec has them. */
export const V1_CREATE_DEFAULTS: CreateDefaults = { secure: false, timeoutS: 15 };
/** The v2 endpoint's defaults: what the SDKs that call it used to send themselves. */
export const V2_CREATE_DEFAULTS: CreateDefaults = { secure: true, timeoutS: 300 };

/** The create body (`NewSandbox`) with its types checked and the endpoint's defaults filled in. */
export function parseCreateBody(body: unknown, defaults: CreateDefaults): CreateInput {
  const o = objectBody(body, false);
  const templateID = optString(o, "templateID");
  if (templateID === undefined || templateID === "") throw invalid(`field "templateID" is required`);
  const autoPause = optBool(o, "autoPause");
  const autoPauseMemory = optBool(o, "autoPauseMemory");
  const ar = o.autoResume;
  let autoResume = false;
  if (ar !== undefined && ar !== null) {
    if (typeof ar !== "object" || Array.isArray(ar)) throw invalid(`field "autoResume" must be an object`);
    autoResume = optBool(ar as Record<string, unknown>, "enabled") ?? false;
  }
  if (autoPauseMemory !== undefined && !autoPause) throw new ApiError(400, "autoPauseMemory can only be set together with autoPause");
  if (autoPauseMemory !== undefined && autoResume) throw new ApiError(400, "autoPauseMemory cannot be set together with autoResume.enabled");
  if (autoResume && !autoPause) throw new ApiError(400, "autoResume.enabled requires autoPause (the lifecycle's onTimeout: pause)");
  if (autoPauseMemory === false) throw new ApiError(400, "autoPauseMemory=false (a filesystem-only pause) is not supported by this server");
  if (Array.isArray(o.volumeMounts) && o.volumeMounts.length > 0) throw new ApiError(400, "volumeMounts are not supported by this server");
  return {
    templateID,
    timeout: optInt(o, "timeout") ?? defaults.timeoutS,
    autoPause,
    autoResume,
    secure: optBool(o, "secure") ?? defaults.secure,
    allowInternetAccess: optBool(o, "allow_internet_access"),
    network: network(o),
    metadata: optStringMap(o, "metadata"),
    envVars: optStringMap(o, "envVars"),
  };
}

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

/**
 * The create body (`NewSandbox`) with its types checked. `secure` defaults to what the endpoint
 * implies: false on /sandboxes (the spec's default), true on /v2/sandboxes, which SDKs that no
 * longer send the flag call.
 */
export function parseCreateBody(body: unknown, secureByDefault: boolean): CreateInput {
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
    timeout: optInt(o, "timeout"),
    autoPause,
    autoResume,
    secure: optBool(o, "secure") ?? secureByDefault,
    allowInternetAccess: optBool(o, "allow_internet_access"),
    network: network(o),
    metadata: optStringMap(o, "metadata"),
    envVars: optStringMap(o, "envVars"),
  };
}

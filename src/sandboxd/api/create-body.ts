import { egressRulesError } from "../network/policy.js";
import { Forbidden, Invalid, invalid } from "../errors.js";
import type { CreateInput } from "../sandboxes/inputs.js";
import { ENVD_PORT } from "../envd-client/port.js";
import { objectBody, onlyKnown, optBool, optInt, optString, optStringList, optStringMap } from "./validate.js";

/** Checks the allow and deny lists as E2B does (400 with its message). */
export function checkEgressRules(allowOut: string[] | undefined, denyOut: string[] | undefined): void {
  const why = egressRulesError(allowOut, denyOut);
  if (why) throw new Invalid(why);
}

/** `network.httpsPorts`: sandbox ports the proxy reaches over TLS; integers 1..65535, never envd's. */
export function httpsPorts(n: Record<string, unknown>): number[] | undefined {
  const v = n.httpsPorts;
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw invalid(`field "network.httpsPorts" must be an array of port numbers`);
  for (const p of v) {
    if (typeof p !== "number" || !Number.isInteger(p) || p < 1 || p > 65535) throw invalid(`field "network.httpsPorts": ${JSON.stringify(p)?.slice(0, 32)} is not a port number (an integer from 1 to 65535)`);
    if (p === ENVD_PORT) throw invalid(`field "network.httpsPorts": the envd port ${ENVD_PORT} cannot be listed`);
  }
  return v as number[];
}

/**
 * `network.rules` (per-domain transforms of outbound HTTPS requests): the shape is checked, and a
 * rule that transforms anything is refused, since sandboxd's egress does not rewrite requests: the
 * sandbox would reach the destination without the headers its owner meant to inject.
 */
export function checkRules(v: unknown, field: string): void {
  if (v === undefined || v === null) return;
  if (typeof v !== "object" || Array.isArray(v)) throw invalid(`field "${field}" must be an object of rule lists`);
  for (const [host, list] of Object.entries(v as Record<string, unknown>)) {
    if (!Array.isArray(list) || list.some((r) => r === null || typeof r !== "object" || Array.isArray(r))) throw invalid(`field "${field}.${host.slice(0, 64)}" must be an array of rules`);
    for (const rule of list as Record<string, unknown>[]) {
      onlyKnown(rule, ["transform"], `${field}.${host.slice(0, 64)}: `);
      if (rule.transform !== undefined && rule.transform !== null) {
        throw new Invalid(`${field}: request transforms (header injection for "${host.slice(0, 64)}") are not supported by this server`);
      }
    }
  }
}

const NETWORK_FIELDS = ["allowOut", "denyOut", "allowPublicTraffic", "maskRequestHost", "rules", "egressProxy", "httpsPorts"] as const;

/** Checks the `network` object's types and its egress rules; the fields are stored as sent. */
function network(o: Record<string, unknown>): Record<string, unknown> | undefined {
  const v = o.network;
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v)) throw invalid(`field "network" must be an object`);
  const n = v as Record<string, unknown>;
  onlyKnown(n, NETWORK_FIELDS, "network: ");
  optBool(n, "allowPublicTraffic");
  const allowOut = optStringList(n, "allowOut", "network.allowOut");
  const denyOut = optStringList(n, "denyOut", "network.denyOut");
  optString(n, "maskRequestHost");
  checkRules(n.rules, "network.rules");
  httpsPorts(n);
  if (n.egressProxy !== undefined && n.egressProxy !== null) throw new Forbidden("egress proxy is not enabled for this team");
  checkEgressRules(allowOut, denyOut);
  return { ...n };
}

/** `mcp`: MCP servers started in the sandbox, which sandboxd does not run (an empty object asks for none). */
function checkMcp(v: unknown): void {
  if (v === undefined || v === null) return;
  if (typeof v !== "object" || Array.isArray(v)) throw invalid(`field "mcp" must be an object`);
  if (Object.keys(v).length > 0) throw new Invalid("mcp: MCP servers in the sandbox are not supported by this server");
}

/** `iam`: workload identity tokens, which sandboxd does not issue (an empty token map asks for none). */
function checkIam(v: unknown): void {
  if (v === undefined || v === null) return;
  if (typeof v !== "object" || Array.isArray(v)) throw invalid(`field "iam" must be an object`);
  const iam = v as Record<string, unknown>;
  onlyKnown(iam, ["tokens"], "iam: ");
  const tokens = iam.tokens;
  if (tokens === undefined || tokens === null) return;
  if (typeof tokens !== "object" || Array.isArray(tokens)) throw invalid(`field "iam.tokens" must be an object`);
  if (Object.keys(tokens).length > 0) throw new Invalid("iam: workload identity tokens are not supported by this server");
}

/** The fields of E2B's NewSandbox / NewSandboxV2 (the v1 body also has `secure`). */
const CREATE_FIELDS = ["templateID", "timeout", "autoPause", "autoPauseMemory", "autoResume", "secure", "allow_internet_access", "network", "metadata", "envVars", "mcp", "iam", "volumeMounts"] as const;

/** What a create endpoint supplies for the fields a client leaves out. */
export interface CreateDefaults {
  /** `secure`: false on /sandboxes (the spec's default), true on /v2/sandboxes. */
  secure: boolean;
  /** Whether a client may turn `secure` off (v1 only: v2 sandboxes are always secured). */
  insecureAllowed: boolean;
  /** `timeout` in seconds: 15 on /sandboxes, 300 on /v2/sandboxes (SDKs from 2.51 send none). */
  timeoutS: number;
}

/** The v1 endpoint's defaults, as E2B's spec has them. */
export const V1_CREATE_DEFAULTS: CreateDefaults = { secure: false, insecureAllowed: true, timeoutS: 15 };
/** The v2 endpoint's defaults: what the SDKs that call it used to send themselves. */
export const V2_CREATE_DEFAULTS: CreateDefaults = { secure: true, insecureAllowed: false, timeoutS: 300 };

/** The create body (`NewSandbox`) with its types checked and the endpoint's defaults filled in. */
export function parseCreateBody(body: unknown, defaults: CreateDefaults): CreateInput {
  const o = objectBody(body, false);
  onlyKnown(o, CREATE_FIELDS, "");
  const templateID = optString(o, "templateID");
  if (templateID === undefined || templateID === "") throw invalid(`field "templateID" is required`);
  const autoPause = optBool(o, "autoPause");
  const autoPauseMemory = optBool(o, "autoPauseMemory");
  const ar = o.autoResume;
  let autoResume = false;
  if (ar !== undefined && ar !== null) {
    if (typeof ar !== "object" || Array.isArray(ar)) throw invalid(`field "autoResume" must be an object`);
    onlyKnown(ar as Record<string, unknown>, ["enabled"], "autoResume: ");
    autoResume = optBool(ar as Record<string, unknown>, "enabled") ?? false;
  }
  if (autoPauseMemory !== undefined && !autoPause) throw new Invalid("autoPauseMemory can only be set together with autoPause");
  if (autoPauseMemory === false && autoResume) throw new Invalid("autoPauseMemory=false cannot be set together with autoResume.enabled: a sandbox paused to disk is resumed only explicitly (connect or resume)");
  if (autoResume && !autoPause) throw new Invalid("autoResume.enabled requires autoPause (the lifecycle's onTimeout: pause)");
  if (o.volumeMounts !== undefined && o.volumeMounts !== null && !Array.isArray(o.volumeMounts)) throw invalid(`field "volumeMounts" must be an array`);
  if (Array.isArray(o.volumeMounts) && o.volumeMounts.length > 0) throw new Invalid("volumeMounts are not supported by this server");
  checkMcp(o.mcp);
  checkIam(o.iam);
  const secure = optBool(o, "secure") ?? defaults.secure;
  if (!secure && !defaults.insecureAllowed) throw invalid(`field "secure": sandboxes made by POST /v2/sandboxes are always secured; secure=false is not accepted`);
  return {
    templateID,
    timeout: optInt(o, "timeout") ?? defaults.timeoutS,
    autoPause,
    autoPauseMemory,
    autoResume,
    secure,
    allowInternetAccess: optBool(o, "allow_internet_access"),
    network: network(o),
    metadata: optStringMap(o, "metadata"),
    envVars: optStringMap(o, "envVars"),
  };
}

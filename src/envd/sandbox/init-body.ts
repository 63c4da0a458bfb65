// Parsing and validating the body of POST /init.
import { parseRfc3339Ns } from "./clock.js";

/** A validated POST /init body (every field optional). */
export interface InitBody {
  accessToken?: string;
  timestampNs?: bigint;
  envVars?: Record<string, string>;
  defaultUser?: string;
  defaultWorkdir?: string;
  caBundle?: string;
  volumeMounts?: { nfs_target: string; path: string }[];
  hyperloopIP?: string;
}

/** Why a body was refused (answered 400 with an empty body, as the reference does). */
export class BadInitBody extends Error {}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function optString(obj: Record<string, unknown>, key: string): string | undefined {
  const v = obj[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw new BadInitBody(`${key} must be a string`);
  return v;
}

/** Parses and validates the raw /init body with the reference's strictness. */
export function parseInitBody(raw: string): InitBody {
  if (raw.trim() === "") return {};
  let data: unknown;
  try {
    data = JSON.parse(raw);
  } catch {
    throw new BadInitBody("body is not valid JSON");
  }
  if (!isRecord(data)) throw new BadInitBody("body must be a JSON object");
  const out: InitBody = {};
  const token = optString(data, "accessToken");
  if (token !== undefined) {
    // Strict like the reference: no empty token, no escape sequences in its JSON text.
    if (token === "") throw new BadInitBody("accessToken must not be empty");
    if (/"accessToken"\s*:\s*"[^"]*\\/.test(raw)) throw new BadInitBody("accessToken must not contain escapes");
    out.accessToken = token;
  }
  const ts = optString(data, "timestamp");
  if (ts !== undefined) {
    out.timestampNs = parseRfc3339Ns(ts);
    if (out.timestampNs === undefined) throw new BadInitBody("timestamp must be RFC 3339");
  }
  if (data.envVars !== undefined && data.envVars !== null) {
    if (!isRecord(data.envVars) || Object.values(data.envVars).some((v) => typeof v !== "string")) {
      throw new BadInitBody("envVars must map strings to strings");
    }
    out.envVars = data.envVars as Record<string, string>;
  }
  out.defaultUser = optString(data, "defaultUser");
  out.defaultWorkdir = optString(data, "defaultWorkdir");
  out.caBundle = optString(data, "caBundle");
  out.hyperloopIP = optString(data, "hyperloopIP");
  if (data.volumeMounts !== undefined && data.volumeMounts !== null) {
    const vm = data.volumeMounts;
    if (!Array.isArray(vm) || vm.some((m) => !isRecord(m) || typeof m.nfs_target !== "string" || typeof m.path !== "string")) {
      throw new BadInitBody("volumeMounts must be an array of {nfs_target, path}");
    }
    out.volumeMounts = vm as { nfs_target: string; path: string }[];
  }
  return out;
}

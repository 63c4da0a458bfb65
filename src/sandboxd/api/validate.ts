/** The checks of request bodies and path parameters, each failing with an Invalid naming the field. */
import { invalid, Invalid } from "../errors.js";

/** The body as an object (an absent body counts as `{}` when `optional`). */
export function objectBody(body: unknown, optional: boolean): Record<string, unknown> {
  if (body === undefined && optional) return {};
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw invalid("request body must be a JSON object");
  return body as Record<string, unknown>;
}

/** An optional boolean field. */
export function optBool(o: Record<string, unknown>, key: string): boolean | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw invalid(`field "${key}" must be a boolean`);
  return v;
}

/** An optional integer field (32-bit, as the API's schema says). */
export function optInt(o: Record<string, unknown>, key: string): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || Math.abs(v) > 2 ** 31 - 1) throw invalid(`field "${key}" must be an integer`);
  return v;
}

/** An optional string field. */
export function optString(o: Record<string, unknown>, key: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw invalid(`field "${key}" must be a string`);
  return v;
}

/** An optional map of strings to strings. */
export function optStringMap(o: Record<string, unknown>, key: string): Record<string, string> | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v)) throw invalid(`field "${key}" must be an object of strings`);
  const out: Record<string, string> = {};
  for (const [k, s] of Object.entries(v as Record<string, unknown>)) {
    if (typeof s !== "string") throw invalid(`field "${key}.${k}" must be a string`);
    out[k] = s;
  }
  return out;
}

/** An optional array of strings. */
export function optStringList(o: Record<string, unknown>, key: string, path: string): string[] | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.some((s) => typeof s !== "string")) throw invalid(`field "${path}" must be an array of strings`);
  return v as string[];
}

/** ShortID: the legacy "<id>-<clientID>" form keeps the part before "-"; the rest must be [a-z0-9]+. */
export function shortId(raw: string): string {
  let id: string;
  try {
    id = decodeURIComponent(raw);
  } catch {
    throw new Invalid("Invalid sandbox ID");
  }
  id = id.split("-", 1)[0];
  if (!/^[a-z0-9]+$/.test(id)) throw new Invalid("Invalid sandbox ID");
  return id;
}

/**
 * Refuses a field this server does not know: a client that asked for something the server would
 * drop must hear so (400 naming the field) rather than run differently than it asked.
 */
export function onlyKnown(o: Record<string, unknown>, known: readonly string[], where: string): void {
  for (const [k, v] of Object.entries(o)) {
    if (v === undefined || v === null || known.includes(k)) continue;
    throw new Invalid(`${where}field "${k.slice(0, 64)}" is not supported by this server`);
  }
}

import { lazy } from "../platform/lazy.js";

const contentDisposition = lazy<typeof import("content-disposition")>("content-disposition", () => require("content-disposition"));

const TSPECIALS = new Set('()<>@,;:\\"/[]?='.split(""));

/** Whether a value needs RFC 2231 encoding: a control character (tab excepted) or non-ASCII. */
function needsEncoding(value: string): boolean {
  for (const ch of value) {
    const c = ch.codePointAt(0)!;
    if ((c < 0x20 || c > 0x7e) && c !== 0x09) return true;
  }
  return false;
}

/** RFC 2231 `utf-8''…` form, escaping what an attribute-char may not be (space, CTLs, * ' % and tspecials). */
function encodeRfc2231(value: string): string {
  let out = "utf-8''";
  for (const byte of Buffer.from(value, "utf8")) {
    const ch = String.fromCharCode(byte);
    const escape = byte <= 0x20 || byte >= 0x7f || ch === "*" || ch === "'" || ch === "%" || TSPECIALS.has(ch);
    out += escape ? "%" + byte.toString(16).toUpperCase().padStart(2, "0") : ch;
  }
  return out;
}

/**
 * `inline; filename=…` as the reference formats it (a media-type parameter): a bare token when
 * possible, a quoted string with backslash escapes otherwise, and `filename*=utf-8''…` for
 * non-ASCII or control characters (no ASCII fallback parameter).
 */
export function inlineDisposition(filename: string): string {
  if (needsEncoding(filename)) return `inline; filename*=${encodeRfc2231(filename)}`;
  return contentDisposition().format({ type: "inline", parameters: { filename } });
}

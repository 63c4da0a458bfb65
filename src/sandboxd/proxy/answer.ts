import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import { endToEnd } from "./headers.js";

/**
 * What a sandbox's answer may be for the proxy to relay it. A sandbox (or whatever listens on
 * its ports, envd's included: sandbox root can replace envd) is hostile: every status and header
 * is checked here before it reaches a client's response, whose writers throw on bad values.
 */

/** 1xx answers tolerated before the final one (real servers send one or two: 100, 103). */
export const MAX_INFORMATIONAL = 32;
/** Bounds of a relayed header block (Node's HTTP/1.1 parser already stops at 16 KiB). */
const MAX_HEADER_BYTES = 64 * 1024;
const MAX_HEADER_COUNT = 256;

/** RFC 9110 token: the characters a field name may have. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Field value characters Node's writers accept (RFC 9110 field-vchar, SP, HTAB, obs-text). */
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
/** Connection-specific fields HTTP/2 forbids (RFC 9113 §8.2.2), whatever endToEnd left. */
const H2_FORBIDDEN = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "http2-settings"]);

/** The status of a final answer as a number the client's response accepts (200–599), else undefined. */
export function finalStatus(value: unknown): number | undefined {
  const n = typeof value === "string" && /^[0-9]{3}$/.test(value) ? Number(value) : value;
  return typeof n === "number" && Number.isInteger(n) && n >= 200 && n <= 599 ? n : undefined;
}

/** Whether a field name and each of its values can be written to a client in either protocol. */
function validField(name: string, values: readonly string[]): boolean {
  if (!TOKEN.test(name) || H2_FORBIDDEN.has(name.toLowerCase())) return false;
  return values.every((v) => !BAD_VALUE.test(v));
}

/** A header's values as strings (numbers from an h2 block become text), or undefined for anything else. */
function valuesOf(value: unknown): string[] | undefined {
  if (typeof value === "string") return [value];
  if (typeof value === "number" && Number.isFinite(value)) return [String(value)];
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value as string[];
  return undefined;
}

/**
 * The end-to-end headers of an upstream answer as they may be written to the client, or undefined
 * when the block cannot be relayed as a whole (a bad name or value, a malformed Content-Length,
 * too many or too large). Repeats are kept only for Set-Cookie; others are joined as one list.
 */
export function relayableHeaders(headers: IncomingHttpHeaders): OutgoingHttpHeaders | undefined {
  const out: OutgoingHttpHeaders = {};
  let bytes = 0;
  let count = 0;
  for (const [rawName, value] of Object.entries(endToEnd(headers))) {
    const name = rawName.toLowerCase();
    const values = valuesOf(value);
    if (!values || !validField(name, values)) return undefined;
    count += values.length;
    for (const v of values) bytes += name.length + v.length + 4;
    if (count > MAX_HEADER_COUNT || bytes > MAX_HEADER_BYTES) return undefined;
    if (name === "content-length" && (values.length !== 1 || !/^[0-9]{1,15}$/.test(values[0]))) return undefined;
    out[name] = name === "set-cookie" ? values : values.join(", ");
  }
  return out;
}

/**
 * Trailers that may be relayed: as headers, but a bad field is dropped rather than failing the
 * answer (its head is already out), as are the framing fields a trailer must not carry.
 */
export function relayableTrailers(trailers: IncomingHttpHeaders | undefined): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  if (!trailers) return out;
  let bytes = 0;
  for (const [rawName, value] of Object.entries(endToEnd(trailers))) {
    const name = rawName.toLowerCase();
    const values = valuesOf(value);
    if (!values || !validField(name, values) || name === "content-length" || name === "content-type" || name === "content-encoding") continue;
    const joined = values.join(", ");
    bytes += name.length + joined.length + 4;
    if (bytes > MAX_HEADER_BYTES) break;
    out[name] = joined;
  }
  return out;
}

/**
 * The header lines of an HTTP/1.1 answer relayed raw (a WebSocket's 101, a declined upgrade),
 * names' case and repeats kept, or undefined when a line cannot be relayed as it is.
 */
export function relayableRawLines(rawHeaders: readonly string[], skip: (lowerName: string) => boolean): string[] | undefined {
  const lines: string[] = [];
  let bytes = 0;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i];
    const value = rawHeaders[i + 1];
    if (!TOKEN.test(name) || BAD_VALUE.test(value)) return undefined;
    if (skip(name.toLowerCase())) continue;
    bytes += name.length + value.length + 4;
    if (lines.length >= MAX_HEADER_COUNT || bytes > MAX_HEADER_BYTES) return undefined;
    lines.push(`${name}: ${value}`);
  }
  return lines;
}

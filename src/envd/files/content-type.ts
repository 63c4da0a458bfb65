import { MIME_TABLE } from "./mime-table.generated.js";

let byExtension: Map<string, string> | undefined;

/** Extension (lower case, no dot) → Content-Type, from the generated table, built on the first lookup. */
function table(): Map<string, string> {
  if (byExtension) return byExtension;
  byExtension = new Map();
  for (const line of MIME_TABLE.split("\n")) {
    const tab = line.indexOf("\t");
    const type = line.slice(0, tab);
    for (const ext of line.slice(tab + 1).split(" ")) byExtension.set(ext, type);
  }
  return byExtension;
}

/** The extension of the last path element as Go's filepath.Ext sees it (a leading dot counts). */
export function extensionOf(path: string): string {
  const base = path.slice(path.lastIndexOf("/") + 1);
  const dot = base.lastIndexOf(".");
  return dot < 0 ? "" : base.slice(dot);
}

/** Content-Type for the raw request path's extension, or undefined when the table has none. */
export function typeByExtension(rawPath: string): string | undefined {
  const ext = extensionOf(rawPath);
  if (!ext) return undefined;
  return table().get(ext.slice(1).toLowerCase());
}

const SIGNATURES: ReadonlyArray<readonly [string, string]> = [
  ["%PDF-", "application/pdf"],
  ["\x89PNG\r\n\x1a\n", "image/png"],
  ["\xff\xd8\xff", "image/jpeg"],
  ["GIF87a", "image/gif"],
  ["GIF89a", "image/gif"],
  ["PK\x03\x04", "application/zip"],
  ["\x1f\x8b\x08", "application/x-gzip"],
  ["%!PS-Adobe-", "application/postscript"],
  ["\x00asm", "application/wasm"],
];

/** Bytes that mark content as binary in the WHATWG sniffing rules Go follows. */
function isBinaryByte(b: number): boolean {
  return b <= 0x08 || b === 0x0b || (b >= 0x0e && b <= 0x1a) || (b >= 0x1c && b <= 0x1f);
}

/**
 * A small subset of Go's http.DetectContentType over the first bytes of a file: a few
 * well-known signatures, HTML, then text vs binary (empty content is text).
 */
export function sniffContentType(head: Buffer): string {
  const latin = head.toString("latin1");
  for (const [magic, type] of SIGNATURES) if (latin.startsWith(magic)) return type;
  const trimmed = latin.replace(/^[\t\n\x0c\r ]+/, "").toLowerCase();
  if (/^<(!doctype html|html|head|body|script|title|iframe|div|p|a|table|h1|br|font|b|style)[ >]/.test(trimmed) || trimmed.startsWith("<!--")) {
    return "text/html; charset=utf-8";
  }
  if (trimmed.startsWith("<?xml")) return "text/xml; charset=utf-8";
  if (head.subarray(0, 2).equals(Buffer.from([0xfe, 0xff]))) return "text/plain; charset=utf-16be";
  if (head.subarray(0, 2).equals(Buffer.from([0xff, 0xfe]))) return "text/plain; charset=utf-16le";
  for (const b of head) if (isBinaryByte(b)) return "application/octet-stream";
  return "text/plain; charset=utf-8";
}

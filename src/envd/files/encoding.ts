import { HttpError } from "../http/errors.js";

/** A content coding this daemon can produce or consume. */
export type Coding = "gzip" | "identity";

interface Offer {
  coding: string;
  q: number;
}

function parseOffers(header: string): Offer[] {
  const offers: Offer[] = [];
  for (const part of header.split(",")) {
    const [name, ...params] = part.split(";");
    const coding = name.trim().toLowerCase();
    if (!coding) continue;
    let q = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*(.*?)\s*$/i.exec(p);
      if (!m) continue;
      const v = Number(m[1]);
      // An unparsable q counts as 1.0, as the reference does.
      q = m[1] !== "" && Number.isFinite(v) ? v : 1;
    }
    offers.push({ coding, q });
  }
  return offers;
}

/**
 * Picks the response coding for an `Accept-Encoding` header exactly as the reference does
 * (envd-behaviour §4.5): highest q wins (ties keep header order), `*` means gzip only when
 * identity is refused, unsupported codings are skipped; throws 406 when nothing is acceptable.
 */
export function negotiateEncoding(header: string | undefined): Coding {
  const offers = parseOffers(header ?? "");
  if (offers.length === 0) return "identity";
  const rejected = identityRejected(offers);
  // Array.prototype.sort is stable, so equal q values keep header order.
  const sorted = [...offers].sort((a, b) => b.q - a.q);
  for (const o of sorted) {
    if (o.q <= 0) continue;
    if (o.coding === "identity") return "identity";
    if (o.coding === "gzip") return "gzip";
    if (o.coding === "*") return rejected ? "gzip" : "identity";
  }
  if (rejected) throw new HttpError(406, "error parsing Accept-Encoding: no acceptable encoding found, supported: [gzip]");
  return "identity";
}

/** Whether identity is explicitly unacceptable (`identity;q=0`, or `*;q=0` without a positive identity). */
export function identityRejected(offers: Offer[] | string | undefined): boolean {
  const list = typeof offers === "string" || offers === undefined ? parseOffers(offers ?? "") : offers;
  const identity = list.find((o) => o.coding === "identity");
  if (identity) return identity.q <= 0;
  return list.some((o) => o.coding === "*" && o.q <= 0);
}

/**
 * Interprets a request `Content-Encoding`: empty or identity → identity, gzip (any case,
 * q suffix tolerated) → gzip; anything else is a 400.
 */
export function requestCoding(header: string | undefined): Coding {
  const value = (header ?? "").split(";")[0].trim().toLowerCase();
  if (value === "" || value === "identity") return "identity";
  if (value === "gzip") return "gzip";
  throw new HttpError(400, `error decompressing request body: unsupported Content-Encoding: ${header}, supported: [gzip]`);
}

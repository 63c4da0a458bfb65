/** The request headers conditional evaluation reads. */
export interface ConditionalHeaders {
  ifMatch?: string;
  ifUnmodifiedSince?: string;
  ifNoneMatch?: string;
  ifModifiedSince?: string;
  ifRange?: string;
  range?: string;
}

/** What to do with a GET after its preconditions: answer 304/412, or serve with an optional range. */
export type Precondition = { status: 304 } | { status: 412 } | { status: 200; range: string | undefined };

function httpDate(value: string | undefined): number | undefined {
  if (!value) return undefined;
  const t = Date.parse(value);
  return Number.isNaN(t) ? undefined : t;
}

/** Whether an `If-Match`/`If-None-Match` list contains `*`; we emit no ETags, so nothing else matches. */
function listHasStar(value: string): boolean {
  return value.split(",").some((v) => v.trim() === "*");
}

/**
 * Evaluates preconditions in RFC 7232 §6 order as Go's ServeContent does, for a resource with
 * the given mtime and no ETag. Times compare at whole-second precision.
 */
export function evaluatePreconditions(h: ConditionalHeaders, mtimeMs: number): Precondition {
  const mtime = Math.floor(mtimeMs / 1000) * 1000;
  if (h.ifMatch !== undefined && h.ifMatch.trim() !== "") {
    if (!listHasStar(h.ifMatch)) return { status: 412 };
  } else {
    const t = httpDate(h.ifUnmodifiedSince);
    if (t !== undefined && mtime > t) return { status: 412 };
  }
  if (h.ifNoneMatch !== undefined && h.ifNoneMatch.trim() !== "") {
    if (listHasStar(h.ifNoneMatch)) return { status: 304 };
  } else {
    const t = httpDate(h.ifModifiedSince);
    if (t !== undefined && mtime <= t) return { status: 304 };
  }
  let range = h.range || undefined;
  if (range && h.ifRange) {
    const ir = h.ifRange.trim();
    // An entity-tag validator can never match (no ETag); a date must equal the mtime exactly.
    const t = ir.startsWith('"') || ir.startsWith("W/") ? undefined : httpDate(ir);
    if (t === undefined || t !== mtime) range = undefined;
  }
  return { status: 200, range };
}

/**
 * The Fetch standard's Headers (guard "none"), for envd's own use. Connect (connect-es and
 * connect-node) builds a Headers for every call context, error and end of stream; Node's global
 * Headers is undici's, and its first use loads all of undici: +18 MiB RSS (+8 MiB anonymous) in a
 * bare Node 24, the largest part of what envd's first command left behind. envd makes no fetch
 * requests, so main.ts installs this class as the global Headers before anything else loads.
 * Behaviour follows the standard: names are case-insensitive tokens, values are trimmed of HTTP
 * whitespace and may not hold NUL, CR or LF; iteration is sorted by name, with the values of a
 * name combined by ", " except Set-Cookie's (test/envd/headers.test.ts compares it with undici's).
 */
export class EnvdHeaders {
  private readonly lists = new Map<string, string[]>();

  constructor(init?: HeadersInit | EnvdHeaders) {
    if (init === undefined || init === null) return;
    if (typeof init !== "object") throw new TypeError("Headers: the init must be an object");
    const iterator = (init as Partial<Iterable<unknown>>)[Symbol.iterator];
    if (typeof iterator === "function") {
      for (const pair of init as Iterable<unknown>) {
        if (pair === null || typeof pair !== "object" || typeof (pair as Partial<Iterable<unknown>>)[Symbol.iterator] !== "function") {
          throw new TypeError("Headers: each header must be a [name, value] pair");
        }
        const items = [...(pair as Iterable<unknown>)];
        if (items.length !== 2) throw new TypeError("Headers: each header must be a [name, value] pair");
        this.append(String(items[0]), String(items[1]));
      }
      return;
    }
    for (const name of Object.keys(init)) this.append(name, String((init as Record<string, string>)[name]));
  }

  append(name: string, value: string): void {
    const key = headerName(name);
    const v = headerValue(value);
    const list = this.lists.get(key);
    if (list) list.push(v);
    else this.lists.set(key, [v]);
  }

  set(name: string, value: string): void {
    this.lists.set(headerName(name), [headerValue(value)]);
  }

  delete(name: string): void {
    this.lists.delete(headerName(name));
  }

  has(name: string): boolean {
    return this.lists.has(headerName(name));
  }

  get(name: string): string | null {
    return this.lists.get(headerName(name))?.join(", ") ?? null;
  }

  getSetCookie(): string[] {
    return [...(this.lists.get("set-cookie") ?? [])];
  }

  forEach(callback: (value: string, key: string, parent: EnvdHeaders) => void, thisArg?: unknown): void {
    for (const [key, value] of this.sorted()) callback.call(thisArg, value, key, this);
  }

  entries(): IterableIterator<[string, string]> {
    return this.sorted()[Symbol.iterator]();
  }

  keys(): IterableIterator<string> {
    return this.sorted().map(([k]) => k)[Symbol.iterator]();
  }

  values(): IterableIterator<string> {
    return this.sorted().map(([, v]) => v)[Symbol.iterator]();
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }

  get [Symbol.toStringTag](): string {
    return "Headers";
  }

  /** The standard's "sort and combine". */
  private sorted(): [string, string][] {
    const out: [string, string][] = [];
    for (const key of [...this.lists.keys()].sort()) {
      const list = this.lists.get(key)!;
      if (key === "set-cookie") for (const v of list) out.push([key, v]);
      else out.push([key, list.join(", ")]);
    }
    return out;
  }
}

/** RFC 9110 token characters: what a header name may be made of. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** HTTP whitespace at either end of a value, which the standard strips. */
const EDGE_WHITESPACE = /^[\t\n\r ]+|[\t\n\r ]+$/g;

function headerName(name: string): string {
  const n = String(name);
  if (!TOKEN.test(n)) throw new TypeError(`Headers: invalid header name "${n.slice(0, 64)}"`);
  return n.toLowerCase();
}

function headerValue(value: string): string {
  const v = String(value).replace(EDGE_WHITESPACE, "");
  if (/[\0\r\n]/.test(v)) throw new TypeError("Headers: invalid header value");
  return v;
}

/**
 * Makes EnvdHeaders the process's global Headers (main.ts, before the rest of envd loads). By
 * assignment: Node's lazy global has a setter that replaces it as a plain property, while
 * Object.defineProperty (or reading its descriptor) on Node 24 loads undici.
 */
export function installHeaders(): void {
  (globalThis as { Headers: unknown }).Headers = EnvdHeaders;
}

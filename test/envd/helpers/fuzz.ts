import net from "node:net";
import { request as httpRequest } from "node:http";
import { readFileSync, readdirSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import assert from "node:assert/strict";
import { ROOT, type Daemon } from "./daemon.js";

/** True under `npm run soak` (ENVD_SOAK=1): the long forms of the reliability suite. */
export const SOAK = process.env.ENVD_SOAK === "1";

/** Picks the quick (CI) or the soak amount of work. */
export function budget<T>(quick: T, soak: T): T {
  return SOAK ? soak : quick;
}

/** A small seeded PRNG (mulberry32): the same seed replays the same inputs. */
export class Rng {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** One element of a non-empty list. */
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }

  /** n pseudo-random bytes. */
  bytes(n: number): Buffer {
    const b = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
}

/** The seed corpus kept in the repository (test/corpus). */
export const CORPUS_DIR = join(ROOT, "test", "envd", "corpus");

/** Reads a JSON file of the seed corpus. */
export function corpusJson<T>(name: string): T {
  return JSON.parse(readFileSync(join(CORPUS_DIR, name), "utf8")) as T;
}

/** The fuzz seeds of the corpus (test/corpus/seeds.json): quick runs use the first `count`. */
export function seeds(count: number): number[] {
  const all = corpusJson<{ seeds: number[] }>("seeds.json").seeds;
  const out = all.slice(0, count);
  // Soak runs extend the list deterministically beyond the kept seeds.
  for (let i = out.length; i < count; i++) out.push((all[i % all.length] * 2654435761 + i) >>> 0);
  return out;
}

/** A Connect envelope: flags byte, big-endian length, payload (length may lie on purpose). */
export function envelope(flags: number, payload: Buffer | string, lengthOverride?: number): Buffer {
  const body = typeof payload === "string" ? Buffer.from(payload) : payload;
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(lengthOverride ?? body.length, 1);
  return Buffer.concat([head, body]);
}

/** A raw HTTP exchange's outcome: parsed status line (0 when none came), headers text and body. */
export interface RawAnswer {
  status: number;
  head: string;
  body: Buffer;
  /** The server closed the connection (rather than the timeout ending the wait). */
  closed: boolean;
}

/**
 * Sends bytes on a fresh TCP connection and collects what comes back until the server closes
 * it, one complete Content-Length response arrived, or `timeoutMs` passes.
 */
export function rawExchange(port: number, data: Buffer | string, timeoutMs = 5000, endWrite = false): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = net.connect({ port, host: "127.0.0.1" });
    let settled = false;
    const finish = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...parseAnswer(Buffer.concat(chunks)), closed });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.on("connect", () => {
      socket.write(data);
      if (endWrite) socket.end();
    });
    socket.on("data", (c: Buffer) => {
      chunks.push(c);
      if (completeResponse(Buffer.concat(chunks))) finish(false);
    });
    socket.on("error", () => finish(true));
    socket.on("close", () => finish(true));
  });
}

function parseAnswer(raw: Buffer): Omit<RawAnswer, "closed"> {
  const sep = raw.indexOf("\r\n\r\n");
  const head = sep < 0 ? raw.toString("latin1") : raw.subarray(0, sep).toString("latin1");
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
  return { status: m ? Number(m[1]) : 0, head, body: sep < 0 ? Buffer.alloc(0) : raw.subarray(sep + 4) };
}

function completeResponse(raw: Buffer): boolean {
  const sep = raw.indexOf("\r\n\r\n");
  if (sep < 0) return false;
  const head = raw.subarray(0, sep).toString("latin1");
  const len = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  if (len) return raw.length - sep - 4 >= Number(len[1]);
  if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) return raw.subarray(sep).includes("\r\n0\r\n\r\n");
  return /^HTTP\/1\.[01] (204|304)/.test(head);
}

/** The Connect codes a well-formed error may carry. */
export const CONNECT_CODES = new Set([
  "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists", "permission_denied",
  "resource_exhausted", "failed_precondition", "aborted", "out_of_range", "unimplemented", "internal", "unavailable",
  "data_loss", "unauthenticated",
]);

/**
 * Asserts an HTTP answer is "clear": a real status line, and any 5xx carries a JSON error whose
 * message says more than a bare "internal error". Returns the parsed JSON body when there is one.
 */
export function assertClear(a: { status: number; body: Buffer | string }, what: string): unknown {
  assert.ok(a.status >= 100 && a.status <= 599, `${what}: no HTTP status (got ${a.status})`);
  const text = typeof a.body === "string" ? a.body : a.body.toString("utf8");
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (a.status >= 500 && a.status !== 503 && a.status !== 507) {
    const message = (json as { message?: unknown } | undefined)?.message;
    assert.equal(typeof message, "string", `${what}: ${a.status} without a JSON message: ${text.slice(0, 200)}`);
    assert.ok(!/^(internal error|internal server error)?$/i.test(String(message).trim()), `${what}: bare 500: ${text.slice(0, 200)}`);
  }
  return json;
}

/** Splits a Connect streaming body into envelopes; the last one must be the end-stream frame. */
export function parseEnvelopes(body: Buffer): { flags: number; data: Buffer }[] {
  const out: { flags: number; data: Buffer }[] = [];
  let off = 0;
  while (off + 5 <= body.length) {
    const len = body.readUInt32BE(off + 1);
    out.push({ flags: body[off], data: body.subarray(off + 5, off + 5 + len) });
    off += 5 + len;
  }
  return out;
}

/** Undoes HTTP/1.1 chunked transfer coding (tolerates a cut-off tail). */
export function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let off = 0;
  for (;;) {
    const eol = body.indexOf("\r\n", off);
    if (eol < 0) break;
    const size = parseInt(body.subarray(off, eol).toString("latin1"), 16);
    if (!Number.isFinite(size) || size === 0) break;
    parts.push(body.subarray(eol + 2, eol + 2 + size));
    off = eol + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

/** Open descriptors and resident memory of a process, from /proc. */
export function procStats(pid: number): { fds: number; rssKiB: number; fdTargets: string[] } {
  const dir = `/proc/${pid}/fd`;
  const fdTargets = readdirSync(dir).map((fd) => {
    try {
      return readlinkSync(join(dir, fd));
    } catch {
      return "?";
    }
  });
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const rss = /VmRSS:\s+(\d+) kB/.exec(status);
  return { fds: fdTargets.length, rssKiB: rss ? Number(rss[1]) : 0, fdTargets };
}

/** Waits until the daemon's descriptor count is at most `limit` (or the time is up); returns the last count. */
export async function settleFds(pid: number, limit: number, timeoutMs = 15_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let n = procStats(pid).fds;
  while (n > limit && Date.now() < deadline) {
    await sleep(100);
    n = procStats(pid).fds;
  }
  return n;
}

/** Waits (up to `timeoutMs`) until `pid` holds at least `atLeast` descriptors; returns its count. */
export async function fdsReach(pid: number, atLeast: number, timeoutMs = 15_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let n = procStats(pid).fds;
  while (n < atLeast && Date.now() < deadline) {
    await sleep(100);
    n = procStats(pid).fds;
  }
  return n;
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Log lines that mean a fault escaped its handler. */
const FAULTS = /unhandled rejection|uncaught|UnhandledPromiseRejection|FATAL ERROR|Segmentation fault|^\s+at .+:\d+:\d+\)?$/im;

/**
 * The daemon survived: its process is alive, /health answers 204 and its output shows no
 * unhandled rejection, uncaught exception or stack trace.
 */
export async function assertHealthy(d: Daemon, what: string): Promise<void> {
  assert.equal(d.proc.exitCode, null, `${what}: daemon exited (${d.proc.exitCode})\n${d.logs().slice(-2000)}`);
  assert.equal(d.proc.signalCode, null, `${what}: daemon killed by ${d.proc.signalCode}`);
  const r = await fetch(`${d.url}/health`, { signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 204, `${what}: /health`);
  const fault = FAULTS.exec(d.logs());
  assert.equal(fault, null, `${what}: fault in daemon output: ${fault?.[0]}\n${d.logs().slice(-3000)}`);
}

/** Runs `fn` over `items` with at most `limit` in flight. */
export async function pool<T>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i], i);
    }
  });
  await Promise.all(workers);
}

/** What an HTTP exchange produced: status, headers, the body read so far, gRPC trailers (h2). */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  trailers: Record<string, string>;
  /** The response was still open after `quietMs` without data (a live stream), and was cut. */
  open: boolean;
  /** HTTP/2 only: the stream's RST_STREAM code and error, when it ended that way. */
  reset?: string;
}

/**
 * POSTs (or sends `method`) with fetch over HTTP/1.1 and reads the answer; a response that goes
 * quiet for `quietMs` is taken to be a live stream and cut.
 */
export async function httpExchange(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: Uint8Array },
  quietMs = 150,
): Promise<Answer> {
  const ac = new AbortController();
  let timedOut = false;
  const hard = setTimeout(() => {
    timedOut = true;
    ac.abort();
  }, 15_000);
  try {
    const res = await fetch(url, { method: init.method ?? "POST", headers: init.headers, body: init.body as BodyInit | undefined, signal: ac.signal });
    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => (headers[k] = v));
    const chunks: Buffer[] = [];
    let open = false;
    if (res.body) {
      const reader = res.body.getReader();
      for (;;) {
        let timer: NodeJS.Timeout | undefined;
        const quiet = new Promise<"quiet">((r) => (timer = setTimeout(() => r("quiet"), quietMs)));
        const next = await Promise.race([reader.read(), quiet]);
        clearTimeout(timer);
        if (next === "quiet") {
          open = true;
          ac.abort();
          reader.cancel().catch(() => undefined);
          break;
        }
        if (next.done) break;
        chunks.push(Buffer.from(next.value));
      }
    }
    return { status: res.status, headers, body: Buffer.concat(chunks), trailers: {}, open };
  } catch (err) {
    if (timedOut) throw new Error(`${init.method ?? "POST"} ${url}: no complete answer within 15 s`);
    throw err;
  } finally {
    clearTimeout(hard);
  }
}

/** One request on an HTTP/2 session (h2c), read like httpExchange; trailers are returned too. */
export function h2Exchange(
  session: import("node:http2").ClientHttp2Session,
  path: string,
  headers: Record<string, string>,
  body: Uint8Array,
  quietMs = 150,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ":method": "POST", ":path": path, ...headers });
    const chunks: Buffer[] = [];
    const out: Answer = { status: 0, headers: {}, body: Buffer.alloc(0), trailers: {}, open: false };
    let quiet: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(quiet);
      quiet = setTimeout(() => {
        out.open = true;
        req.close();
        done();
      }, quietMs);
    };
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      clearTimeout(quiet);
      clearTimeout(hard);
      out.body = Buffer.concat(chunks);
      resolve(out);
    };
    const hard = setTimeout(() => {
      req.close();
      reject(new Error(`h2 ${path}: no end within 15 s`));
    }, 15_000);
    req.on("response", (h) => {
      out.status = Number(h[":status"]);
      for (const [k, v] of Object.entries(h)) if (!k.startsWith(":")) out.headers[k] = String(v);
      arm();
    });
    req.on("trailers", (t) => {
      for (const [k, v] of Object.entries(t)) out.trailers[k] = String(v);
    });
    req.on("data", (c: Buffer) => {
      chunks.push(c);
      arm();
    });
    req.on("end", done);
    req.on("close", () => {
      if (!out.status) out.reset = `rst ${req.rstCode} session ${session.destroyed ? "destroyed" : "alive"}`;
      done();
    });
    req.on("error", (err: NodeJS.ErrnoException) => {
      out.reset = `error ${err.code}: ${err.message}`;
      done();
    });
    req.end(body);
  });
}

/**
 * One HTTP/1.1 request on its own connection (no keep-alive pool), so the daemon's descriptor
 * count is not inflated by idle client sockets.
 */
export function oneShot(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: Uint8Array | string } = {},
): Promise<{ status: number; headers: import("node:http").IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: opts.method ?? "GET", headers: opts.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error(`${url}: no answer within 30 s`)));
    req.on("error", reject);
    req.end(opts.body);
  });
}

import { fstatSync, write, writeSync } from "node:fs";
import { isatty } from "node:tty";

/**
 * The JSON-lines logger both programs use: `{"level":"info","time":"<ISO>","logger":"envd",…fields,"msg":"…"}`
 * on one descriptor (pino's line format with level labels and ISO times). Not pino itself: in envd,
 * pino and what it loads (node:assert, worker_threads, a transport layer) took 1.2 MiB of idle RSS
 * and 11 ms of CPU before the first answer (medians of 11 starts on Node 24), and sandboxd starts
 * one envd per sandbox; both programs need only levels, fields and redaction.
 *
 * Lines to a pipe, socket or terminal are written asynchronously (a synchronous write per request
 * cost ~0.2 ms of the event loop each, and a full pipe stalled every request); lines waiting beyond
 * MAX_BUFFERED_BYTES are dropped and counted, and what is still buffered is written synchronously
 * when the process exits. Lines to a regular file or /dev/null (sandboxd gives envd its console
 * file) are written at once: ~1 µs a line there, against ~50 µs of CPU for a write through libuv's
 * thread pool, which an idle daemon then never starts (+1.7 MiB RSS). A write that takes longer
 * than SLOW_WRITE_MS (a disk under pressure) turns that off for good.
 */
export interface LogFn {
  (fields: object, msg?: string): void;
  (msg: string): void;
}

export interface Logger {
  trace: LogFn;
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  fatal: LogFn;
}

export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
type Emitting = Exclude<LogLevel, "silent">;

export function isLogLevel(s: string): s is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(s);
}

/** Log lines waiting for a stuck output beyond this are dropped rather than held in memory. */
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

/** By default a direct write slower than this sends every later line through the asynchronous path. */
const SLOW_WRITE_MS = 5;

/** Whether writes to `fd` complete at once: a regular file, or a character device that is not a terminal (/dev/null). */
function writesAtOnce(fd: number): boolean {
  try {
    const st = fstatSync(fd);
    return st.isFile() || (st.isCharacterDevice() && !isatty(fd));
  } catch {
    return false;
  }
}

export interface JsonLoggerOptions {
  level: string;
  fd: number;
  name: string;
  /** Field paths removed from every line: `key` (top level), `*.key` (one level down), `a.b` or `a["b"]`. */
  redact?: string[];
  /** A direct write slower than this (ms, default 5) sends every later line through the asynchronous path. */
  slowWriteMs?: number;
}

/** A logger writing JSON lines to `opts.fd`; an unknown level is an error naming the known ones. */
export function createJsonLogger(opts: JsonLoggerOptions): Logger {
  if (!isLogLevel(opts.level)) throw new Error(`log level must be one of ${LOG_LEVELS.join("|")}, got '${opts.level}'`);
  const min = LOG_LEVELS.indexOf(opts.level);
  const out = new LineWriter(opts.fd, opts.slowWriteMs ?? SLOW_WRITE_MS);
  const prefix = `,"logger":${JSON.stringify(opts.name)}`;
  const redact = opts.redact ? compileRedaction(opts.redact) : undefined;
  const make = (level: Emitting): LogFn => {
    if (LOG_LEVELS.indexOf(level) < min) return noop;
    const head = `{"level":"${level}","time":"`;
    return ((a: object | string, b?: string) => {
      const fields = typeof a === "string" ? undefined : a;
      const msg = typeof a === "string" ? a : b;
      out.push(`${head}${new Date().toISOString()}"${prefix}${fieldsJson(fields, redact)}${msg === undefined ? "" : `,"msg":${JSON.stringify(String(msg))}`}}\n`);
    }) as LogFn;
  };
  return { trace: make("trace"), debug: make("debug"), info: make("info"), warn: make("warn"), error: make("error"), fatal: make("fatal") };
}

const noop: LogFn = () => undefined;

/** `fields` as `,"k":v,…` (empty when there are none); values that JSON cannot hold become strings. */
function fieldsJson(fields: object | undefined, redact: ((o: Record<string, unknown>) => Record<string, unknown>) | undefined): string {
  if (fields === undefined || fields === null) return "";
  let obj = fields as Record<string, unknown>;
  if (obj instanceof Error) obj = { err: obj };
  if (redact) obj = redact(obj);
  let text: string;
  try {
    text = JSON.stringify(obj, replacer);
  } catch {
    text = JSON.stringify(safeCopy(obj, new WeakSet()));
  }
  return text.length > 2 ? `,${text.slice(1, -1)}` : "";
}

/** Errors keep their type, message and stack (as pino's `err` serializer did); bigints become strings. */
function replacer(_key: string, value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Error) return { type: value.name, message: value.message, stack: value.stack };
  return value;
}

/** A copy of `v` without cycles (replaced by "[Circular]") and with getters that throw skipped. */
function safeCopy(v: unknown, seen: WeakSet<object>): unknown {
  v = replacer("", v);
  if (typeof v !== "object" || v === null) return v;
  if (seen.has(v)) return "[Circular]";
  seen.add(v);
  if (Array.isArray(v)) return v.map((x) => safeCopy(x, seen));
  const copy: Record<string, unknown> = {};
  for (const k of Object.keys(v)) {
    try {
      copy[k] = safeCopy((v as Record<string, unknown>)[k], seen);
    } catch {
      copy[k] = "[Unreadable]";
    }
  }
  return copy;
}

/** A function returning a shallow-copied object without the given paths (the input is never changed). */
function compileRedaction(paths: string[]): (o: Record<string, unknown>) => Record<string, unknown> {
  const parsed = paths.map((p) => p.replace(/\["([^"]+)"\]/g, ".$1").split("."));
  return (o) => {
    let copy: Record<string, unknown> | undefined;
    for (const [first, second] of parsed) {
      if (second === undefined) {
        if (first in o) delete (copy ??= { ...o })[first];
        continue;
      }
      for (const k of first === "*" ? Object.keys(o) : [first]) {
        const inner = (copy ?? o)[k];
        if (inner && typeof inner === "object" && !Array.isArray(inner) && second in inner) {
          const { [second]: _gone, ...rest } = inner as Record<string, unknown>;
          (copy ??= { ...o })[k] = rest;
        }
      }
    }
    return copy ?? o;
  };
}

/** Queues lines and writes them with at most one write in flight; flushed synchronously at exit. */
class LineWriter {
  private queue: string[] = [];
  private queued = 0;
  private writing = false;
  private dropped = 0;

  private direct: boolean;

  constructor(
    private readonly fd: number,
    private readonly slowWriteMs: number,
  ) {
    this.direct = writesAtOnce(fd);
    process.once("exit", () => this.flushSync());
  }

  push(line: string): void {
    if (this.direct && !this.writing) return this.writeDirect(line);
    if (this.queued + line.length > MAX_BUFFERED_BYTES) {
      this.dropped++;
      return;
    }
    this.queue.push(line);
    this.queued += line.length;
    if (!this.writing) this.writeSoon();
  }

  /** One line, now; an error (a full disk) loses it, as on the asynchronous path. */
  private writeDirect(line: string): void {
    const buf = Buffer.from(line);
    const started = performance.now();
    try {
      for (let off = 0; off < buf.length; ) off += writeSync(this.fd, buf, off, buf.length - off);
    } catch {
      // not delivered; later lines may be
    }
    if (performance.now() - started > this.slowWriteMs) this.direct = false;
  }

  private writeSoon(): void {
    this.writing = true;
    setImmediate(() => this.writeNext());
  }

  private take(): Buffer {
    if (this.dropped > 0) {
      this.queue.push(`{"level":"warn","time":"${new Date().toISOString()}","msg":"log lines dropped: output not keeping up","dropped":${this.dropped}}\n`);
      this.dropped = 0;
    }
    const buf = Buffer.from(this.queue.join(""));
    this.queue = [];
    this.queued = 0;
    return buf;
  }

  private writeNext(): void {
    if (this.queue.length === 0) {
      this.writing = false;
      return;
    }
    this.writeAll(this.take(), 0);
  }

  private writeAll(buf: Buffer, off: number): void {
    write(this.fd, buf, off, buf.length - off, null, (err, n) => {
      if (err && (err as NodeJS.ErrnoException).code === "EAGAIN") return void setTimeout(() => this.writeAll(buf, off), 10);
      // Any other error (the reader went away): these lines cannot be delivered; later ones may be.
      if (!err && off + n < buf.length) return this.writeAll(buf, off + n);
      this.writeNext();
    });
  }

  /** Writes what is queued now, blocking; a write already in flight may finish after it. */
  flushSync(): void {
    if (this.queue.length === 0) return;
    const buf = this.take();
    let off = 0;
    for (let tries = 0; off < buf.length && tries < 1000; ) {
      try {
        off += writeSync(this.fd, buf, off, buf.length - off);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EAGAIN") return;
        tries++;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2);
      }
    }
  }
}

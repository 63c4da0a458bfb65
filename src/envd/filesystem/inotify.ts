import { createRequire } from "node:module";
import { existsSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import { endianness } from "node:os";

/** An open inotify instance inside the addon (opaque). */
export type InotifyHandle = { readonly __brand: "inotify" };

/** The surface of native/inotify (see inotify.c for why it exists). */
export interface InotifyAddon {
  open(onReadable: (status: number) => void): InotifyHandle;
  addWatch(handle: InotifyHandle, path: string, mask: number): number;
  rmWatch(handle: InotifyHandle, wd: number): number;
  read(handle: InotifyHandle): Buffer | null;
  close(handle: InotifyHandle): void;
  constants: Record<
    | "IN_ACCESS" | "IN_MODIFY" | "IN_ATTRIB" | "IN_CLOSE_WRITE" | "IN_MOVED_FROM" | "IN_MOVED_TO" | "IN_CREATE"
    | "IN_DELETE" | "IN_DELETE_SELF" | "IN_MOVE_SELF" | "IN_UNMOUNT" | "IN_Q_OVERFLOW" | "IN_IGNORED"
    | "IN_ONLYDIR" | "IN_DONT_FOLLOW" | "IN_EXCL_UNLINK" | "IN_ISDIR",
    number
  >;
}

/** One kernel `struct inotify_event`. */
export interface RawEvent {
  wd: number;
  mask: number;
  cookie: number;
  name: string;
}

const ADDON_FILE = "inotify.node";

function safeRealpath(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

/**
 * Files the addon is looked for at, in order: $ENVD_ADDON_DIR, beside the running script, the
 * repo build output next to it, beside the executable and its ../lib/envd (single-executable
 * artifact), /usr/lib/envd (installed), then the build output in any folder above the script
 * or the working directory (compiled tests run from build/test).
 */
export function addonCandidates(env: NodeJS.ProcessEnv = process.env): string[] {
  const release = ["native", "inotify", "build", "Release"];
  const dirs: string[] = [];
  if (env.ENVD_ADDON_DIR) dirs.push(env.ENVD_ADDON_DIR);
  const script = process.argv[1] ? dirname(safeRealpath(process.argv[1])) : undefined;
  if (script) dirs.push(script, join(script, "..", ...release));
  const exe = dirname(process.execPath);
  dirs.push(exe, join(exe, "..", "lib", "envd"), "/usr/lib/envd");
  for (const start of [script, process.cwd()]) {
    for (let dir = start, i = 0; dir && i < 6; i++, dir = dirname(dir)) dirs.push(join(dir, ...release));
  }
  return [...new Set(dirs.map((d) => join(d, ADDON_FILE)))];
}

let loaded: InotifyAddon | Error | undefined;

/** Loads the addon once; throws an Error naming every place tried when it cannot be found or loaded. */
export function loadInotify(): InotifyAddon {
  if (loaded instanceof Error) throw loaded;
  if (loaded) return loaded;
  const require = createRequire(join(process.cwd(), "noop.js"));
  const tried = addonCandidates();
  for (const file of tried) {
    if (!existsSync(file)) continue;
    try {
      loaded = require(file) as InotifyAddon;
      return loaded;
    } catch (err) {
      loaded = new Error(`cannot load inotify addon ${file}: ${(err as Error).message}`);
      throw loaded;
    }
  }
  loaded = new Error(`inotify addon not found (looked at ${tried.join(", ")})`);
  throw loaded;
}

const LE = endianness() === "LE";

/** Splits a read() buffer into kernel events (names are NUL-padded on the wire). */
export function parseEvents(buf: Buffer): RawEvent[] {
  const out: RawEvent[] = [];
  let off = 0;
  while (off + 16 <= buf.length) {
    const wd = LE ? buf.readInt32LE(off) : buf.readInt32BE(off);
    const mask = LE ? buf.readUInt32LE(off + 4) : buf.readUInt32BE(off + 4);
    const cookie = LE ? buf.readUInt32LE(off + 8) : buf.readUInt32BE(off + 8);
    const len = LE ? buf.readUInt32LE(off + 12) : buf.readUInt32BE(off + 12);
    const raw = buf.subarray(off + 16, off + 16 + len);
    const nul = raw.indexOf(0);
    out.push({ wd, mask, cookie, name: (nul < 0 ? raw : raw.subarray(0, nul)).toString("utf8") });
    off += 16 + len;
  }
  return out;
}

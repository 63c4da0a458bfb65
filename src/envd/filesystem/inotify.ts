// The inotify surface of envd's native addon (native/inotify/inotify.c) and the parsing of the
// kernel's event records it hands over; recursion, event mapping and buffering are in hub.ts and
// dir-watch.ts.
import { endianness } from "node:os";
import { loadNativeAddon } from "../platform/native-addon.js";

/** An open inotify instance inside the addon (opaque). */
export type InotifyHandle = { readonly __brand: "inotify" };

/** The inotify surface of the addon (see native/inotify/inotify.c for why it exists). */
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

/** Loads the addon once (platform/native-addon.ts) as its inotify surface; throws an Error naming every place tried when it cannot. */
export function loadInotify(): InotifyAddon {
  return loadNativeAddon() as InotifyAddon;
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

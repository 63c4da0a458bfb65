import { lstatSync, realpathSync, statSync, type BigIntStats } from "node:fs";
import { basename } from "node:path";
import { create } from "@bufbuild/protobuf";
import { TimestampSchema, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { EntryInfoSchema, FileType, type EntryInfo } from "../gen/filesystem/filesystem_pb.js";
import { readMetadataSync } from "./xattr.js";
import { fsError, goError } from "./go-error.js";

/** Turns uids and gids into names (decimal ids when unknown); UserDb satisfies it. */
export interface NameLookup {
  userName(uid: number): string;
  groupName(gid: number): string;
}

/** Wraps a NameLookup with a memo, for requests that describe many entries at once. */
export function cachedNames(names: NameLookup): NameLookup {
  const users = new Map<number, string>();
  const groups = new Map<number, string>();
  return {
    userName: (uid) => users.get(uid) ?? users.set(uid, names.userName(uid)).get(uid)!,
    groupName: (gid) => groups.get(gid) ?? groups.set(gid, names.groupName(gid)).get(gid)!,
  };
}

const S_IFMT = 0o170000;
const S_IFSOCK = 0o140000;
const S_IFLNK = 0o120000;
const S_IFBLK = 0o060000;
const S_IFDIR = 0o040000;
const S_IFCHR = 0o020000;
const S_IFIFO = 0o010000;

/** Go's `FileMode.String()` for a Unix st_mode: type/special letters in Go's order, then rwx bits. */
export function goPermissions(mode: number): string {
  const type = mode & S_IFMT;
  let s = "";
  if (type === S_IFDIR) s += "d";
  if (type === S_IFLNK) s += "L";
  if (type === S_IFBLK || type === S_IFCHR) s += "D";
  if (type === S_IFIFO) s += "p";
  if (type === S_IFSOCK) s += "S";
  if (mode & 0o4000) s += "u";
  if (mode & 0o2000) s += "g";
  if (type === S_IFCHR) s += "c";
  if (mode & 0o1000) s += "t";
  if (s === "") s = "-";
  const rwx = "rwxrwxrwx";
  for (let i = 0; i < 9; i++) s += mode & (1 << (8 - i)) ? rwx[i] : "-";
  return s;
}

function fileType(st: BigIntStats | undefined): FileType {
  if (st?.isFile()) return FileType.FILE;
  if (st?.isDirectory()) return FileType.DIRECTORY;
  return FileType.UNSPECIFIED;
}

function mtime(ns: bigint): Timestamp | undefined {
  if (ns === 0n) return undefined;
  let seconds = ns / 1_000_000_000n;
  let nanos = Number(ns % 1_000_000_000n);
  if (nanos < 0) {
    seconds -= 1n;
    nanos += 1_000_000_000;
  }
  return create(TimestampSchema, { seconds, nanos });
}

/** What a symlink resolves to: its absolute real path and the stat of that, or nothing when broken/cyclic. */
interface Target {
  real: string;
  st: BigIntStats;
}

/** Builds EntryInfo (envd-behaviour §2.4) from what was read about `path`; pure. */
export function describe(
  path: string,
  lst: BigIntStats,
  target: Target | undefined,
  metadata: Record<string, string>,
  names: NameLookup,
): EntryInfo {
  const link = lst.isSymbolicLink();
  const typed = link ? target?.st : lst;
  return create(EntryInfoSchema, {
    name: basename(path) || path,
    type: fileType(typed),
    path,
    size: lst.size,
    mode: typed ? Number(typed.mode) & 0o777 : 0,
    permissions: goPermissions(Number(lst.mode)),
    owner: names.userName(Number(lst.uid)),
    group: names.groupName(Number(lst.gid)),
    modifiedTime: mtime(lst.mtimeNs),
    symlinkTarget: link ? (target?.real ?? path) : undefined,
    metadata,
  });
}

function resolveTargetSync(path: string): Target | undefined {
  try {
    const real = realpathSync(path);
    return { real, st: statSync(real, { bigint: true }) };
  } catch {
    return undefined;
  }
}

/** Synchronous describePath, for listings that describe entries in short synchronous batches. */
export function describePathSync(path: string, lst: BigIntStats, names: NameLookup): EntryInfo {
  const target = lst.isSymbolicLink() ? resolveTargetSync(path) : undefined;
  return describe(path, lst, target, readMetadataSync(path), names);
}

/**
 * EntryInfo of `path`; missing → not_found "file not found: ...", other failures → internal.
 * Synchronous, like the listings: an lstat, at most a realpath and a stat for a symlink, and the
 * xattr reads take microseconds on a local filesystem, while each thread-pool round trip costs
 * a whole turn of the event loop, which under load is what a Stat waits for (three turns before).
 */
export function entryInfo(path: string, names: NameLookup): EntryInfo {
  let lst: BigIntStats;
  try {
    lst = lstatSync(path, { bigint: true });
  } catch (err) {
    throw statError(err);
  }
  return describePathSync(path, lst, names);
}

/** Synchronous entryInfo: undefined when the path no longer exists (watch events omit the entry then). */
export function entryInfoSync(path: string, names: NameLookup): EntryInfo | undefined {
  let lst: BigIntStats;
  try {
    lst = lstatSync(path, { bigint: true });
  } catch {
    return undefined;
  }
  return describePathSync(path, lst, names);
}

/** The Stat error for an lstat failure, worded like the reference. */
export function statError(err: unknown): ConnectError {
  if ((err as NodeJS.ErrnoException).code === "ENOENT") {
    return new ConnectError(`file not found: ${goError(err)}`, Code.NotFound, undefined, undefined, err);
  }
  return fsError("error getting file info", err);
}

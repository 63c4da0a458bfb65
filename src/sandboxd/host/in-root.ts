/**
 * Host-side access to files inside a root filesystem a sandbox or an image controls (a template
 * rootfs, an overlay's upper layer, a build's layer). Every path is resolved one component at a
 * time without following any link: each directory is opened with O_DIRECTORY|O_NOFOLLOW and the
 * next name is looked up through /proc/self/fd/<fd>/<name>, which resolves in exactly that
 * directory (Node has no openat; this is openat's walk). A symlink anywhere on the way (a template
 * that made /etc a link to a host directory) fails the call with ELOOP instead of leading host
 * root out of the root; ".." is refused, so nothing climbs above it.
 */
import { closeSync, constants, fchownSync, fstatSync, lstatSync, mkdirSync, openSync, readlinkSync, readSync, rmdirSync, type Stats, unlinkSync, writeSync } from "node:fs";

// libuv opens every file with O_CLOEXEC itself
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** Linux's O_PATH (x86 and arm64 alike; Node does not export it): a handle for fstat that opens nothing, devices included. */
const O_PATH = 0o10000000;

/** The names of a path relative to the root; "." and empty parts are dropped, ".." refused. */
function components(rel: string): string[] {
  const parts = rel.split("/").filter((p) => p !== "" && p !== ".");
  for (const p of parts) {
    if (p === "..") throw Object.assign(new Error(`path ${JSON.stringify(rel)} climbs out of its root`), { code: "EACCES" });
    if (p.includes("\0")) throw Object.assign(new Error("path contains a NUL byte"), { code: "EINVAL" });
  }
  return parts;
}

/** The path that names `name` inside the directory open as `fd`. */
function at(fd: number, name: string): string {
  return `/proc/self/fd/${fd}/${name}`;
}

/**
 * Opens the directory `rel` below `root` (root itself for "" or "/") without following links;
 * the caller closes the descriptor. Throws ENOENT, ENOTDIR or ELOOP as the walk meets them.
 */
export function openDirInRoot(root: string, rel: string): number {
  let fd = openSync(root, DIR_FLAGS);
  try {
    for (const name of components(rel)) {
      const next = openSync(at(fd, name), DIR_FLAGS);
      closeSync(fd);
      fd = next;
    }
    return fd;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/** Runs `fn` with the open parent directory of `rel` and its last name. */
function withParent<T>(root: string, rel: string, fn: (dirFd: number, name: string) => T): T {
  const parts = components(rel);
  const name = parts.pop();
  if (name === undefined) throw Object.assign(new Error("the root itself has no parent"), { code: "EINVAL" });
  const fd = openDirInRoot(root, parts.join("/"));
  try {
    return fn(fd, name);
  } finally {
    closeSync(fd);
  }
}

/** The lstat of `rel` below `root` (a link is reported as a link), or undefined when the walk does not reach it. */
export function lstatInRoot(root: string, rel: string): Stats | undefined {
  try {
    if (components(rel).length === 0) return lstatSync(root);
    return withParent(root, rel, (fd, name) => lstatSync(at(fd, name)));
  } catch {
    return undefined;
  }
}

/** Most links one resolution follows (the kernel's own limit). */
const MAX_LINKS = 40;

/**
 * Opens `rel` below `root` the way the sandbox itself would see it (RESOLVE_IN_ROOT): links are
 * followed, but an absolute target restarts at `root` and ".." stops there, so the walk never
 * leaves the root; every step is opened without following, so a link swapped in meanwhile fails
 * the call instead of being followed on the host. The caller closes the descriptor.
 */
export function openInRootFollowing(root: string, rel: string, flags = constants.O_RDONLY | constants.O_NONBLOCK): number {
  const rootFd = openSync(root, DIR_FLAGS);
  const stack = [rootFd];
  const queue = rel.split("/").filter((p) => p !== "" && p !== ".");
  let links = 0;
  try {
    while (queue.length > 0) {
      const name = queue.shift()!;
      if (name.includes("\0")) throw Object.assign(new Error("path contains a NUL byte"), { code: "EINVAL" });
      if (name === "..") {
        if (stack.length > 1) closeSync(stack.pop()!);
        continue;
      }
      const path = at(stack[stack.length - 1], name);
      if (lstatSync(path).isSymbolicLink()) {
        if (++links > MAX_LINKS) throw Object.assign(new Error(`too many links resolving ${rel}`), { code: "ELOOP" });
        const target = readlinkSync(path);
        if (target.startsWith("/")) while (stack.length > 1) closeSync(stack.pop()!);
        queue.unshift(...target.split("/").filter((p) => p !== "" && p !== "."));
        continue;
      }
      if (queue.length === 0) return openSync(path, flags | constants.O_NOFOLLOW);
      stack.push(openSync(path, DIR_FLAGS));
    }
    // the path named a directory (or the root itself): hand back a descriptor of its own
    return openSync(at(stack[stack.length - 1], "."), DIR_FLAGS);
  } finally {
    for (const fd of stack) closeSync(fd);
  }
}

/** The stat of what `rel` names inside `root` as the sandbox sees it (links followed within the root), or undefined. */
export function statInRootFollowing(root: string, rel: string): Stats | undefined {
  let fd: number;
  try {
    fd = openInRootFollowing(root, rel, O_PATH);
  } catch {
    return undefined;
  }
  try {
    return fstatSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Whether `rel` below `root` is a regular file (or a directory, with kind "dir"), reached without following links. */
export function existsInRoot(root: string, rel: string, kind: "file" | "dir" = "file"): boolean {
  const st = lstatInRoot(root, rel);
  return kind === "dir" ? !!st?.isDirectory() : !!st?.isFile();
}

/**
 * Reads at most `maxBytes` of the regular file `rel` below `root` (links refused, FIFOs and
 * devices too: opened non-blocking and checked before a byte is read).
 */
export function readFileInRoot(root: string, rel: string, maxBytes: number): Buffer {
  return withParent(root, rel, (dirFd, name) => {
    const fd = openSync(at(dirFd, name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const st = fstatSync(fd);
      if (!st.isFile()) throw Object.assign(new Error(`${rel} is not a regular file`), { code: "EINVAL" });
      const buf = Buffer.alloc(Math.min(st.size, maxBytes));
      let got = 0;
      while (got < buf.length) {
        const n = readSync(fd, buf, got, buf.length - got, got);
        if (n === 0) break;
        got += n;
      }
      return buf.subarray(0, got);
    } finally {
      closeSync(fd);
    }
  });
}

/** Ownership and mode of a file or directory made inside a root. */
export interface InRootOwner {
  mode?: number;
  uid?: number;
  gid?: number;
}

/**
 * Writes `data` as the new regular file `rel` below `root`, replacing whatever entry had that
 * name (a link there is removed, never followed); the parent must already exist.
 */
export function writeFileInRoot(root: string, rel: string, data: string | Buffer, o: InRootOwner = {}): void {
  withParent(root, rel, (dirFd, name) => {
    const path = at(dirFd, name);
    try {
      unlinkSync(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, o.mode ?? 0o644);
    try {
      const buf = typeof data === "string" ? Buffer.from(data) : data;
      for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
      if (o.uid !== undefined || o.gid !== undefined) fchownSync(fd, o.uid ?? -1, o.gid ?? -1);
    } finally {
      closeSync(fd);
    }
  });
}

/** Makes the directory `rel` below `root` (its parent must exist); an existing directory is kept as it is. */
export function mkdirInRoot(root: string, rel: string, o: InRootOwner = {}): void {
  withParent(root, rel, (dirFd, name) => {
    try {
      mkdirSync(at(dirFd, name), { mode: o.mode ?? 0o755 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST") {
        // only a real directory counts: a link or a file with the name is an error
        const fd = openSync(at(dirFd, name), DIR_FLAGS);
        closeSync(fd);
        return;
      }
      throw err;
    }
    if (o.uid !== undefined || o.gid !== undefined) {
      const fd = openSync(at(dirFd, name), DIR_FLAGS);
      try {
        fchownSync(fd, o.uid ?? -1, o.gid ?? -1);
      } finally {
        closeSync(fd);
      }
    }
  });
}

/** Removes the empty directory `rel` below `root`; a missing one is fine, a link is never followed. */
export function rmdirInRoot(root: string, rel: string): void {
  try {
    withParent(root, rel, (dirFd, name) => rmdirSync(at(dirFd, name)));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

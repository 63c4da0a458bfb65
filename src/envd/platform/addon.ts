// The extras envd's always-shipped addon carries besides inotify (native/spawn, native/fs and the
// helpers of native/addon.c): each is looked up once, and is undefined when the addon (or that
// function in an older build) is missing, so every caller keeps a pure-Node fallback.
import { loadNativeAddon } from "./native-addon.js";

/** What a native spawn sets in the child besides its ids (see spawn). */
export interface SpawnOptions {
  groups?: number[];
  nice?: number;
  ioprio?: number;
  oomScoreAdj?: number;
}

/** The functions of the addon besides inotify, as the TypeScript side calls them. */
export interface AddonExtras {
  /** malloc_trim(0); true when memory was released. */
  trimMalloc(): boolean;
  /** A close-on-exec pipe with its capacity raised (best effort): [readFd, writeFd, capacity]. */
  pipe(capacity: number): [number, number, number];
  /** Writes the padded base64 of `src` into `dst` at `offset`; returns the bytes written. */
  base64Encode(src: Uint8Array, dst: Uint8Array, offset: number): number;
  /** Strict base64 decode of `src` into `dst`; the bytes written, or -1 (invalid, or dst too small). Bench client only. */
  base64Decode(src: Uint8Array, dst: Uint8Array): number;
  /**
   * Starts `file` (PATH-searched in `envp`) without forking envd (native/spawn/spawn.c); uid/gid
   * null keep ours (any other value must be an id from 0 to 2^32 - 2, else a RangeError), cwd "" keeps ours; `fds` become the child's stdin/stdout/stderr. Returns the
   * pid; throws an Error coded with the errno name when it cannot exec. `onExit` gets the exit
   * code (-1 when killed) and the signal number (0 when it exited). `options` set, in the child
   * before exec, its supplementary groups (without them a change of uid or gid drops them all),
   * niceness, IO priority (ioprio_set value) and oom_score_adj; failures of the last three are ignored.
   */
  spawn(
    file: string,
    argv: string[],
    envp: string[],
    cwd: string,
    uid: number | null,
    gid: number | null,
    fds: number[],
    setsid: boolean,
    onExit: (code: number, signal: number) => void,
    options?: SpawnOptions,
  ): number;
  /** envd's own IO priority (ioprio_get(2): class << 13 | data), or -errno. */
  ioprioGet(): number;
  /** Whether spawned children can be watched here (pidfd_open, Linux ≥ 5.3). */
  spawnSupported(): boolean;
  /**
   * One filesystem call made on a thread of its own with a user's filesystem ids and groups
   * (native/fs/asuser.c), so the kernel checks permissions and follows links as for that
   * user. `op`: 0 open(path, flags, mode) → fd (close-on-exec), 1 mkdir -p (mode 0755), 2
   * rename(path, path2), 3 unlink(path). Resolves with [result, at, inMkdir]: result is the fd
   * or 0, or -errno; `at` is the length of the path prefix mkdir -p failed on, and `inMkdir`
   * whether the failing call was the mkdir itself (the user reached that directory) rather than
   * a lookup on the way.
   */
  asUser(op: number, uid: number, gid: number, groups: readonly number[], path: string, path2: string, flags: number, mode: number): Promise<[number, number, boolean?]>;
  /**
   * Removes the entry `name` of directory `dir` and, if it is a directory, its whole tree, on a
   * worker thread, relative to open directory handles and never through a symbolic link
   * (native/fs/fsat.c). Links on the way to `dir` are read and walked, not left to the
   * kernel: past a link someone other than root made, `dir` must be one the user (uid, gid,
   * groups) may write, else EACCES. A missing entry is success; rejects with an Error coded
   * with the errno name, carrying `syscall` and `path`.
   */
  removeTree(dir: string, name: string, uid: number, gid: number, groups: readonly number[]): Promise<void>;
  /**
   * Creates the missing directories of the absolute `path` on a worker thread: each with
   * mkdirat in its parent's handle, born owned by uid:gid (never chowned afterwards) and opened
   * without following a link. Existing components are walked as named, links read and followed;
   * past a link someone other than root made, creating (or keeping an fd to rename into) needs
   * the user's write permission there, else EACCES (syscall "walk"). Resolves with an fd of the
   * final directory when `keepFd` (the caller closes it), else -1; rejects like removeTree.
   */
  makeDirs(path: string, uid: number, gid: number, groups: readonly number[], keepFd: boolean): Promise<number>;
  /**
   * rename(2) of the entry `sourceName` of `sourceDir` to the entry `name` of the open directory
   * `dirFd`, on a worker thread. `sourceDir` is walked like removeTree's `dir`: past another
   * user's link it must be one the user may write (and, if sticky, the entry theirs), else EACCES.
   */
  renameAt(sourceDir: string, sourceName: string, dirFd: number, name: string, uid: number, gid: number, groups: readonly number[]): Promise<void>;
}

const found = new Map<keyof AddonExtras, unknown>();

/** One extra function of the addon, or undefined without it. */
export function addonExtra<K extends keyof AddonExtras>(name: K): AddonExtras[K] | undefined {
  if (!found.has(name)) {
    let fn: unknown;
    try {
      const addon = loadNativeAddon() as Partial<AddonExtras>;
      fn = typeof addon[name] === "function" ? (addon[name] as (...a: unknown[]) => unknown).bind(addon) : undefined;
    } catch {
      fn = undefined;
    }
    found.set(name, fn);
  }
  return found.get(name) as AddonExtras[K] | undefined;
}

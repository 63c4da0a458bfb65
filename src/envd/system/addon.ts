import { loadInotify } from "../filesystem/inotify.js";

/**
 * The extras our always-shipped addon (native/inotify) carries besides inotify: each is looked
 * up once, and is undefined when the addon (or that function in an older build) is missing, so
 * every caller keeps a pure-Node fallback.
 */
/** What a native spawn sets in the child besides its ids (see spawn). */
export interface SpawnOptions {
  groups?: number[];
  nice?: number;
  ioprio?: number;
  oomScoreAdj?: number;
}

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
   * Starts `file` (PATH-searched in `envp`) without forking envd (native/inotify/spawn.c); uid/gid
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
  /** Whether spawned children can be watched here (pidfd_open, Linux ≥ 5.3). */
  spawnSupported(): boolean;
}

const found = new Map<keyof AddonExtras, unknown>();

/** One extra function of the addon, or undefined without it. */
export function addonExtra<K extends keyof AddonExtras>(name: K): AddonExtras[K] | undefined {
  if (!found.has(name)) {
    let fn: unknown;
    try {
      const addon = loadInotify() as unknown as Partial<AddonExtras>;
      fn = typeof addon[name] === "function" ? (addon[name] as (...a: unknown[]) => unknown).bind(addon) : undefined;
    } catch {
      fn = undefined;
    }
    found.set(name, fn);
  }
  return found.get(name) as AddonExtras[K] | undefined;
}

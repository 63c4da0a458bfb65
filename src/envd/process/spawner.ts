import { spawn as nodeSpawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { Socket, type OnReadOpts, type SocketConstructorOpts } from "node:net";
import { constants } from "node:os";
import type { Readable, Writable } from "node:stream";
import { addonExtra } from "../platform/addon.js";
import type { SpawnPlan } from "./plan.js";
import { SlabReader } from "./read-slabs.js";
import { int32Id, type ExecLine } from "./wrapper.js";

/** Which output a stream carries. */
export type OutputKind = "stdout" | "stderr";

/** A spawned child as pipes.ts drives it, whichever way it was started. */
export interface Child {
  readonly pid: number;
  readonly stdin: Writable | undefined;
  /** stdout and stderr; a slab reader when the stream reads into slabs ("slabRead" events, see read-slabs.ts). */
  readonly outputs: [Readable, OutputKind, SlabReader | undefined][];
  /** Called once, when the child was reaped. */
  onExit(cb: (code: number | null, signal: NodeJS.Signals | null) => void): void;
  /** Lets the event loop end while the child runs (daemon shutdown; a no-op for the native spawn, whose exit watcher stays: the daemon exits explicitly). */
  unref(): void;
}

/** Capacity asked for each output pipe: room for big reads when envd is busy (the kernel default is 64 KiB). */
const PIPE_CAPACITY = 1024 * 1024;

/** Slab reads stop for the turn once this much waits to be published (one bulk turn's worth). */
export const MAX_UNPUBLISHED_BYTES = 512 * 1024;

/**
 * Starts `line` for `plan` in a session of its own, stdout and stderr on pipes, stdin on a pipe
 * or /dev/null. With our addon: spawned without fork (native/spawn/spawn.c) on pipes read into
 * reused slabs; else by Node. Rejects with an Error like Node's ("spawn cat ENOENT").
 */
export async function spawnChild(plan: SpawnPlan, line: ExecLine): Promise<Child> {
  return nativeSupported() ? nativeChild(plan, line) : nodeChild(plan, line);
}

let supported: boolean | undefined;

/** Whether processes start through the addon's spawn (else Node's, which forks). */
export function nativeSupported(): boolean {
  if (supported === undefined) {
    const probe = addonExtra("spawnSupported");
    supported = !!(probe && addonExtra("spawn") && addonExtra("pipe") && probe());
  }
  return supported;
}

let devNull: number | undefined;

function nativeChild(plan: SpawnPlan, line: ExecLine): Child {
  const pipe = addonExtra("pipe")!;
  const opened: number[] = [];
  const make = (capacity: number): [number, number] => {
    const [r, w] = pipe(capacity);
    opened.push(r, w);
    return [r, w];
  };
  try {
    const out = make(PIPE_CAPACITY);
    const err = make(PIPE_CAPACITY);
    const input = plan.stdin ? make(0) : undefined;
    devNull ??= openSync("/dev/null", "r");
    let exitCb: ((code: number | null, signal: NodeJS.Signals | null) => void) | undefined;
    let exited: [number | null, NodeJS.Signals | null] | undefined;
    let stdin: Socket | undefined;
    const onExit = (code: number, signal: number): void => {
      exited = signal ? [null, signalName(signal)] : [code, null];
      // As Node does for its children: nobody reads the stdin pipe any more.
      stdin?.destroy();
      exitCb?.(...exited);
    };
    const pid = spawnOrThrow(line, plan, [input?.[0] ?? devNull, out[1], err[1]], onExit);
    // The child has its own copies now.
    for (const fd of [out[1], err[1], input?.[0]]) if (fd !== undefined) closeSync(fd);
    if (input) stdin = new Socket({ fd: input[1], readable: false, writable: true });
    const stdout = slabSocket(out[0]);
    const stderr = slabSocket(err[0]);
    const outputs: Child["outputs"] = [
      [stdout.socket, "stdout", stdout.reader],
      [stderr.socket, "stderr", stderr.reader],
    ];
    return {
      pid,
      stdin,
      outputs,
      onExit(cb) {
        exitCb = cb;
        if (exited) cb(...exited);
      },
      unref: () => undefined,
    };
  } catch (e) {
    for (const fd of opened) closeQuietly(fd);
    throw e;
  }
}

function spawnOrThrow(line: ExecLine, plan: SpawnPlan, fds: number[], onExit: (code: number, signal: number) => void): number {
  const env = Object.entries(plan.env).map(([k, v]) => `${k}=${v}`);
  try {
    return addonExtra("spawn")!(line.file, [line.file, ...line.args], env, plan.cwd, line.uid ?? null, line.gid ?? null, fds, true, onExit, line.options);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? "EINVAL";
    throw Object.assign(new Error(`spawn ${line.file} ${code}`), { code, errno: (e as NodeJS.ErrnoException).errno, syscall: `spawn ${line.file}`, path: line.file });
  }
}

function signalName(n: number): NodeJS.Signals | null {
  for (const [name, value] of Object.entries(constants.signals)) if (value === n) return name as NodeJS.Signals;
  return null;
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already closed
  }
}

/** The read end of a pipe as a socket whose reads land in its slab reader (no 'data' events). */
function slabSocket(fd: number): { socket: Socket; reader: SlabReader } {
  const reader = new SlabReader();
  // `onread` (Node ≥ 12.1) is documented for net.connect; the Socket constructor takes it too.
  // Returning false stops reading (libuv would otherwise read up to 32 times per poll):
  // pipes.ts resumes once the reads so far are published.
  const options: SocketConstructorOpts & { onread: OnReadOpts } = {
    fd,
    readable: true,
    writable: false,
    onread: {
      buffer: () => reader.buffer(),
      callback: (n: number) => {
        socket.emit("slabRead", reader.took(n));
        return reader.pendingBytes < MAX_UNPUBLISHED_BYTES;
      },
    },
  };
  const socket = new Socket(options);
  socket.once("close", () => reader.close());
  return { socket, reader };
}

/** Node's own spawn (fork + exec) on Node's pipes: where the addon is missing. */
async function nodeChild(plan: SpawnPlan, line: ExecLine): Promise<Child> {
  const child = nodeSpawn(line.file, line.args, {
    cwd: plan.cwd,
    env: plan.env,
    detached: true,
    stdio: [plan.stdin ? "pipe" : "ignore", "pipe", "pipe"],
    uid: int32Id(line.uid),
    gid: int32Id(line.gid),
  });
  if (child.pid === undefined) throw await new Promise<Error>((resolve) => child.once("error", resolve));
  child.on("error", () => undefined); // later errors (a failed kill) are reported where they happen
  return {
    pid: child.pid,
    stdin: child.stdin ?? undefined,
    outputs: [
      [child.stdout!, "stdout", undefined],
      [child.stderr!, "stderr", undefined],
    ],
    onExit: (cb) => child.once("exit", cb),
    unref: () => child.unref(),
  };
}

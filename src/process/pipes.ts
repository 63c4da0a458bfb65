import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, writeFileSync } from "node:fs";
import { Socket, type OnReadOpts, type SocketConstructorOpts } from "node:net";
import type { Readable, Writable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import { addonExtra } from "../system/addon.js";
import type { ChildIo, StdinPort } from "./child-io.js";
import type { ProcessHandle } from "./handle.js";
import { MAX_PENDING_STDIN_BYTES, PIPE_CHUNK_BYTES } from "./limits.js";
import { commandText, type SpawnPlan } from "./plan.js";
import { SlabReader, type SlabReads } from "./read-slabs.js";
import { directLine, execLine, type ExecLine, type ExecTools } from "./wrapper.js";

/** Slab reads stop for the turn once this much waits to be published (one bulk turn's worth). */
const MAX_UNPUBLISHED_BYTES = 512 * 1024;

/** Capacity asked for each output pipe: room for big reads when envd is busy (the kernel default is 64 KiB). */
const PIPE_CAPACITY = 1024 * 1024;

/**
 * Spawns a non-PTY process with stdout/stderr pipes (and a stdin pipe when asked, else
 * /dev/null), as the leader of its own session and process group so signals can reach
 * its whole tree, and wires it to `handle`. The output pipes come from our addon when it is
 * there (read into reused slabs, see read-slabs.ts), else from Node.
 */
export async function spawnPiped(plan: SpawnPlan, tools: ExecTools, handle: ProcessHandle): Promise<void> {
  const pipes = outputPipes();
  let spawned: { child: ChildProcess } | { error: Error };
  try {
    const direct = directLine(plan.cmd, plan.args, plan.user, tools);
    spawned = direct ? await trySpawn(plan, direct, pipes) : { error: new Error("no direct exec") };
    if ("child" in spawned) setOomScore(spawned.child.pid!);
    else spawned = await trySpawn(plan, execLine(plan.cmd, plan.args, plan.user, tools), pipes);
  } finally {
    // The child has its own copies of the write ends (or never will).
    pipes?.forEach((p) => closeQuietly(p.write));
  }
  if ("error" in spawned) {
    pipes?.forEach((p) => closeQuietly(p.read));
    const { error } = spawned;
    throw new ConnectError(`error starting process '${commandText(plan.cmd, plan.args)}': ${error.message}`, Code.InvalidArgument, undefined, undefined, error);
  }
  const { child } = spawned;
  child.on("error", () => undefined); // later errors (a failed kill) are reported where they happen
  const outputs: [Readable, OutputKind, SlabReader?][] = pipes
    ? pipes.map((p) => [slabSocket(p.read, p.reader), p.kind, p.reader])
    : [[child.stdout!, "stdout"], [child.stderr!, "stderr"]];
  handle.attach(pipeIo(child, outputs.map(([s]) => s)), outputs.length);
  for (const [stream, kind, reader] of outputs) watchOutput(stream, kind, handle, reader);
  child.once("exit", (code, signal) => handle.exited({ code, signal }));
}

type OutputKind = "stdout" | "stderr";

/** One output pipe made by the addon: envd reads `read` into slabs, the child writes `write`. */
interface OutputPipe {
  kind: OutputKind;
  read: number;
  write: number;
  reader: SlabReader;
}

/** stdout and stderr pipes from the addon, or undefined without it. */
function outputPipes(): OutputPipe[] | undefined {
  const make = addonExtra("pipe");
  if (!make) return undefined;
  const made: OutputPipe[] = [];
  try {
    for (const kind of ["stdout", "stderr"] as const) {
      const [read, write] = make(PIPE_CAPACITY);
      made.push({ kind, read, write, reader: new SlabReader() });
    }
    return made;
  } catch {
    made.forEach((p) => closeQuietly(p.read, p.write));
    return undefined;
  }
}

function closeQuietly(...fds: number[]): void {
  for (const fd of fds) {
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
  }
}

/** The read end of a pipe as a socket whose reads land in `reader`'s slabs (no 'data' events). */
function slabSocket(fd: number, reader: SlabReader): Socket {
  // `onread` (Node ≥ 12.1) is documented for net.connect; the Socket constructor takes it too.
  const options: SocketConstructorOpts & { onread: OnReadOpts } = {
    fd,
    readable: true,
    writable: false,
    // Returning false stops reading (libuv would otherwise read up to 32 times per poll):
    // watchOutput resumes once the reads so far are published.
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
  return socket;
}

/** Spawns one exec line: the running child, or why it could not start. */
async function trySpawn(plan: SpawnPlan, line: ExecLine, pipes: OutputPipe[] | undefined): Promise<{ child: ChildProcess } | { error: Error }> {
  let child: ChildProcess;
  try {
    child = spawn(line.file, line.args, {
      cwd: plan.cwd,
      env: plan.env,
      detached: true,
      stdio: [plan.stdin ? "pipe" : "ignore", pipes?.[0].write ?? "pipe", pipes?.[1].write ?? "pipe"],
      uid: line.uid,
      gid: line.gid,
    });
  } catch (err) {
    return { error: err as Error };
  }
  if (child.pid === undefined) return { error: await new Promise<Error>((resolve) => child.once("error", resolve)) };
  return { child };
}

/** What the wrapper script does for itself, done from outside for a direct exec. */
function setOomScore(pid: number): void {
  try {
    writeFileSync(`/proc/${pid}/oom_score_adj`, "100");
  } catch {
    // the process is already gone, or /proc is not mounted: nothing to adjust
  }
}

/**
 * Feeds one output stream to `handle`. Reads that arrive in the same turn of the event loop
 * leave as one group (events of up to PIPE_CHUNK_BYTES): far fewer messages for bulk output,
 * no added latency for a trickle. Slab reads come as "slabRead" events and leave with the
 * lease on their slabs; Node's own pipes as "data".
 */
function watchOutput(stream: Readable, kind: OutputKind, handle: ProcessHandle, reader: SlabReader | undefined): void {
  let done = false;
  const eof = (): void => {
    if (done) return;
    done = true;
    handle.eof();
  };
  let pending: Buffer[] = [];
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    if (reader) {
      const stopped = reader.pendingBytes >= MAX_UNPUBLISHED_BYTES;
      if (reader.pending) publish(reader.drain());
      // Reading stopped itself for this turn: go on unless the handle paused it meanwhile.
      if (stopped && !stream.isPaused() && !stream.destroyed) stream.resume();
      return;
    }
    if (pending.length === 0) return;
    const reads = pending;
    pending = [];
    handle.data(kind, reads, PIPE_CHUNK_BYTES);
  };
  const publish = (group: SlabReads): void => {
    handle.data(kind, group.reads, PIPE_CHUNK_BYTES, group.lease);
    group.published();
  };
  stream.on(reader ? "slabRead" : "data", (chunk: Buffer) => {
    handle.arrived(chunk.length);
    if (!reader) pending.push(chunk);
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  });
  stream.once("end", () => {
    flush();
    eof();
  });
  stream.once("close", eof);
  stream.on("error", eof);
}

function pipeIo(child: ChildProcess, outputs: Readable[]): ChildIo {
  return {
    pid: child.pid!,
    pause: () => outputs.forEach((s) => s.pause()),
    resume: () => outputs.forEach((s) => s.resume()),
    stdin: child.stdin ? stdinPort(child.stdin) : undefined,
    release: () => {
      for (const s of outputs) s.destroy();
      child.stdin?.destroy();
      child.unref();
    },
  };
}

function stdinPort(stream: Writable): StdinPort {
  let broken = false;
  stream.on("error", () => {
    broken = true;
  });
  return {
    get writable() {
      return !broken && stream.writable && !stream.destroyed;
    },
    write(bytes) {
      if (stream.writableLength + bytes.byteLength > MAX_PENDING_STDIN_BYTES) {
        return Promise.reject(
          new ConnectError("stdin buffer is full: the process is not reading its input", Code.ResourceExhausted),
        );
      }
      return new Promise((resolve, reject) => {
        stream.write(bytes, (err) => (err ? reject(err) : resolve()));
      });
    },
    close() {
      if (!stream.writableEnded) stream.end();
    },
  };
}

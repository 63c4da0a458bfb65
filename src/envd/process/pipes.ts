import { writeFileSync } from "node:fs";
import type { Readable, Writable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ChildIo, StdinPort } from "./child-io.js";
import type { ProcessHandle } from "./handle.js";
import { MAX_PENDING_STDIN_BYTES, PIPE_CHUNK_BYTES } from "./limits.js";
import { commandText, type SpawnPlan } from "./plan.js";
import type { SlabReader, SlabReads } from "./read-slabs.js";
import { MAX_UNPUBLISHED_BYTES, nativeSupported, spawnChild, type Child, type OutputKind } from "./spawner.js";
import { directLine, execLine, nativeLine, type ExecTools } from "./wrapper.js";

/**
 * Spawns a non-PTY process with stdout/stderr pipes (and a stdin pipe when asked, else
 * /dev/null), as the leader of its own session and process group so signals can reach
 * its whole tree, and wires it to `handle` (see spawner.ts for how).
 */
export async function spawnPiped(plan: SpawnPlan, tools: ExecTools, handle: ProcessHandle): Promise<void> {
  const direct = nativeSupported() ? nativeLine(plan.cmd, plan.args, plan.user, tools) : directLine(plan.cmd, plan.args, plan.user, tools);
  let child: Child | undefined;
  if (direct) {
    try {
      child = await spawnChild(plan, direct);
      if (!direct.options) setOomScore(child.pid);
    } catch {
      // a missing command: the wrapper runs it and reports exit code 127, as the reference does
    }
  }
  if (!child) {
    try {
      child = await spawnChild(plan, execLine(plan.cmd, plan.args, plan.user, tools));
    } catch (err) {
      throw new ConnectError(`error starting process '${commandText(plan.cmd, plan.args)}': ${(err as Error).message}`, Code.InvalidArgument, undefined, undefined, err);
    }
  }
  handle.attach(pipeIo(child), child.outputs.length);
  for (const [stream, kind, reader] of child.outputs) watchOutput(stream, kind, handle, reader);
  child.onExit((code, signal) => handle.exited({ code, signal }));
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

function pipeIo(child: Child): ChildIo {
  const outputs = child.outputs.map(([s]) => s);
  return {
    pid: child.pid,
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

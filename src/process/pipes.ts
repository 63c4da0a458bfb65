import { spawn, type ChildProcess } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ChildIo, StdinPort } from "./child-io.js";
import type { ProcessHandle } from "./handle.js";
import { MAX_PENDING_STDIN_BYTES, PIPE_CHUNK_BYTES } from "./limits.js";
import { commandText, type SpawnPlan } from "./plan.js";
import { directLine, execLine, type ExecLine, type ExecTools } from "./wrapper.js";
import { writeFileSync } from "node:fs";

/**
 * Spawns a non-PTY process with stdout/stderr pipes (and a stdin pipe when asked, else
 * /dev/null), as the leader of its own session and process group so signals can reach
 * its whole tree, and wires it to `handle`.
 */
export async function spawnPiped(plan: SpawnPlan, tools: ExecTools, handle: ProcessHandle): Promise<void> {
  const direct = directLine(plan.cmd, plan.args, plan.user, tools);
  let spawned = direct ? await trySpawn(plan, direct) : undefined;
  if (spawned && "child" in spawned) setOomScore(spawned.child.pid!);
  else spawned = await trySpawn(plan, execLine(plan.cmd, plan.args, plan.user, tools));
  if ("error" in spawned) {
    const { error } = spawned;
    throw new ConnectError(`error starting process '${commandText(plan.cmd, plan.args)}': ${error.message}`, Code.InvalidArgument, undefined, undefined, error);
  }
  const { child } = spawned;
  const pid = child.pid!;
  child.on("error", () => undefined); // later errors (a failed kill) are reported where they happen
  const outputs = [child.stdout, child.stderr].filter((s): s is Readable => s !== null);
  handle.attach(pipeIo(pid, child, outputs), outputs.length);
  watchOutput(child.stdout, "stdout", handle);
  watchOutput(child.stderr, "stderr", handle);
  child.once("exit", (code, signal) => handle.exited({ code, signal }));
}

/** Spawns one exec line: the running child, or why it could not start. */
async function trySpawn(plan: SpawnPlan, line: ExecLine): Promise<{ child: ChildProcess } | { error: Error }> {
  let child: ChildProcess;
  try {
    child = spawn(line.file, line.args, {
      cwd: plan.cwd,
      env: plan.env,
      detached: true,
      stdio: [plan.stdin ? "pipe" : "ignore", "pipe", "pipe"],
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

function watchOutput(stream: Readable | null, kind: "stdout" | "stderr", handle: ProcessHandle): void {
  if (!stream) return;
  let done = false;
  const eof = (): void => {
    if (done) return;
    done = true;
    handle.eof();
  };
  // Reads that arrive in the same turn of the event loop leave as one event (up to
  // PIPE_CHUNK_BYTES): far fewer messages for bulk output, no added latency for a trickle.
  let pending: Buffer[] = [];
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    if (pending.length === 0) return;
    const reads = pending;
    pending = [];
    handle.data(kind, reads, PIPE_CHUNK_BYTES);
  };
  stream.on("data", (chunk: Buffer) => {
    handle.arrived(chunk.length);
    pending.push(chunk);
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

function pipeIo(pid: number, child: ChildProcess, outputs: Readable[]): ChildIo {
  return {
    pid,
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

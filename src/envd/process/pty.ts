import { closeSync, constants, openSync } from "node:fs";
import type { IPty } from "node-pty";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ChildIo } from "./child-io.js";
import type { ProcessHandle } from "./handle.js";
import { signalName } from "./exit-status.js";
import { PTY_CHUNK_BYTES } from "./limits.js";
import { commandText, type SpawnPlan } from "./plan.js";
import { execLine, int32Id, type ExecTools } from "./wrapper.js";
import { lazy } from "../platform/lazy.js";

// node-pty (and its native addon) is loaded by the first PTY start, not at start.
const nodePty = lazy<typeof import("node-pty")>("node-pty", () => require("node-pty"));

/**
 * Spawns a process on a new PTY of the requested size (node-pty makes it a session leader
 * with the terminal as its controlling tty) and wires it to `handle`. The uid, gid and
 * supplementary groups are set by the exec wrapper inside the terminal.
 */
export function spawnOnPty(plan: SpawnPlan, tools: ExecTools, handle: ProcessHandle): void {
  const size = plan.pty ?? { cols: 80, rows: 24 };
  // node-pty always exports TERM (its `name`); unset it again when the request did not ask for one.
  const line = execLine(plan.cmd, plan.args, plan.user, tools, plan.env.TERM === undefined);
  let term: IPty;
  try {
    term = nodePty().spawn(line.file, line.args, {
      name: plan.env.TERM ?? "xterm",
      cols: size.cols,
      rows: size.rows,
      cwd: plan.cwd,
      env: plan.env,
      encoding: null,
      uid: int32Id(line.uid),
      gid: int32Id(line.gid),
    });
  } catch (err) {
    throw new ConnectError(
      `error starting pty with command '${commandText(plan.cmd, plan.args)}' in dir '${plan.cwd}' with '${size.cols}' cols and '${size.rows}' rows: ${(err as Error).message}`,
      Code.InvalidArgument,
      undefined,
      undefined,
      err,
    );
  }
  const slave = holdSlave(term);
  handle.attach(ptyIo(term, slave), 1);
  // With `encoding: null` node-pty hands out Buffers, though its typings say string.
  term.onData((chunk) => handle.data("pty", chunk as unknown as Buffer, PTY_CHUNK_BYTES));
  // node-pty reports the exit only after the terminal's output was read to the end (or 200 ms).
  term.onExit(({ exitCode, signal }) => {
    slave.close();
    handle.eof();
    handle.exited(signal ? { code: null, signal: signalName(signal) } : { code: exitCode, signal: null });
  });
}

/**
 * Opens an extra descriptor of the terminal's slave side in envd. While it is open the
 * master never sees the slave hang up, so the last output written just before the process
 * exits is still read (node-pty otherwise loses it now and then when the hang-up wins the
 * race); node-pty closes the master shortly after the exit.
 */
function holdSlave(term: IPty): { close(): void } {
  const path = (term as IPty & { ptsName?: string }).ptsName;
  let fd: number | undefined;
  try {
    if (path) fd = openSync(path, constants.O_RDWR | constants.O_NOCTTY);
  } catch {
    fd = undefined; // best effort: without it only the race above remains
  }
  return {
    close() {
      if (fd === undefined) return;
      closeSync(fd);
      fd = undefined;
    },
  };
}

function ptyIo(term: IPty, slave: { close(): void }): ChildIo {
  return {
    pid: term.pid,
    pause: () => term.pause(),
    resume: () => term.resume(),
    terminal: {
      write: (bytes) => term.write(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)),
      resize: (cols, rows) => term.resize(cols, rows),
    },
    // Closing the master would hang the terminal up (SIGHUP): leave it to the daemon's exit.
    release: () => {
      term.pause();
      slave.close();
    },
  };
}

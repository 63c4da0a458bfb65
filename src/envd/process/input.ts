import { Code, ConnectError } from "@connectrpc/connect";
import type { ProcessInput, StreamInputRequest } from "../gen/process/process_pb.js";
import type { ProcessHandle } from "./handle.js";
import { MAX_INPUT_BYTES } from "./limits.js";
import type { ProcessRegistry } from "./registry.js";

/** Applies one input message to a process: stdin bytes to its pipe, pty bytes to its terminal. */
export async function applyInput(handle: ProcessHandle, input: ProcessInput | undefined): Promise<void> {
  const data = input?.input;
  if (!data?.case) throw new ConnectError("input must set stdin or pty", Code.InvalidArgument);
  if (data.value.byteLength > MAX_INPUT_BYTES) {
    throw new ConnectError(
      `input of ${data.value.byteLength} bytes is larger than the ${MAX_INPUT_BYTES / (1024 * 1024)} MiB allowed per message; send it in parts`,
      Code.InvalidArgument,
    );
  }
  if (data.case === "stdin") await handle.writeStdin(data.value);
  else await handle.writePty(data.value);
}

/**
 * Applies a client stream of input in order: `start` selects (or switches) the target,
 * `data` is written like SendInput, keep-alives are ignored. Data before any start is
 * invalid_argument; the first failure ends the call. Stdin stays open when the stream ends.
 */
export async function streamInput(requests: AsyncIterable<StreamInputRequest>, registry: ProcessRegistry): Promise<void> {
  let target: ProcessHandle | undefined;
  const it = requests[Symbol.asyncIterator]();
  for (;;) {
    let next: IteratorResult<StreamInputRequest>;
    try {
      next = await it.next();
    } catch (err) {
      const detail = err instanceof ConnectError ? err.rawMessage : (err as Error).message;
      // A message the server refused to read (undecodable, oversize) keeps its code; a broken transport is unknown.
      const code = err instanceof ConnectError && err.code !== Code.Unknown && err.code !== Code.Canceled ? err.code : Code.Unknown;
      throw new ConnectError(`error streaming input: ${detail}`, code, undefined, undefined, err);
    }
    if (next.done) return;
    const ev = next.value.event;
    if (ev.case === "start") target = registry.findLive(ev.value.process);
    else if (ev.case === "data") {
      if (!target) throw new ConnectError("input data received before a start message selecting the process", Code.InvalidArgument);
      await applyInput(target, ev.value.input);
    }
  }
}

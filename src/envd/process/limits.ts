import { Code, ConnectError } from "@connectrpc/connect";
import type { BroadcastLimits } from "./broadcast.js";

const KiB = 1024;
const MiB = 1024 * KiB;

/** Per-subscriber output queue: cut beyond 16 MiB; "full" from 2 MiB until it drains below 512 KiB. */
export const OUTPUT_LIMITS: BroadcastLimits = { maxBytes: 16 * MiB, highWater: 2 * MiB, lowWater: 512 * KiB };

/** The error a subscriber gets when it falls past OUTPUT_LIMITS.maxBytes behind. */
export function tooFarBehind(): ConnectError {
  return new ConnectError(
    `subscriber fell too far behind the process output (more than ${OUTPUT_LIMITS.maxBytes / MiB} MiB queued); output was dropped for this stream only, reconnect to continue`,
    Code.ResourceExhausted,
  );
}

/**
 * Largest single output event from a pipe. The reference sends ≤ 32 KiB per event; clients
 * accept any size, and coalesced 256 KiB events cut per-message cost for bulk output.
 */
export const PIPE_CHUNK_BYTES = 256 * KiB;

/** Largest single output event from a PTY (the reference reads PTYs in 16 KiB chunks). */
export const PTY_CHUNK_BYTES = 16 * KiB;

/** Largest input accepted in one SendInput / StreamInput message. */
export const MAX_INPUT_BYTES = 16 * MiB;

/** Most stdin bytes that may wait for a process that is not reading its stdin. */
export const MAX_PENDING_STDIN_BYTES = 64 * MiB;

/** How long exited processes stay findable by Connect (pid or tag). */
export const EXIT_RETENTION_MS = 30_000;

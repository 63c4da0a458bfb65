// What a streaming service and envd's transport agree on, and nothing of either side's code: the
// call a server stream's implementation is given, the implementation's shape, the ready frames a
// service may hand over instead of messages, and the context key by which the transport says
// that a frame reached the kernel. process/ and filesystem/ implement against this room (with
// keepalive.ts); http/ serves it (framed-stream.ts, direct-stream.ts).
import { createContextKey } from "@connectrpc/connect";
import type { User } from "../auth/users.js";

/** What a server stream's implementation needs from its call, however the call arrived. */
export interface StreamCall {
  /** Aborted when the client leaves, the deadline passes or the daemon shuts down. */
  readonly signal: AbortSignal;
  /** A request header by name (any case), or null. */
  header(name: string): string | null;
  /** The user the request named in its Basic auth header, if any. */
  readonly user: User | undefined;
}

/** A server-streaming implementation that takes a StreamCall instead of a HandlerContext. */
export type DirectStream = (message: unknown, call: StreamCall) => AsyncIterable<unknown>;

/** Direct implementations of a service's server streams, by method local name. */
export type DirectStreams = Partial<Record<string, DirectStream>>;

/**
 * One response message as ready Connect frame pieces; `written` is called once they reached the
 * kernel. `last`: no message follows this one in its stream (the direct path then ends the
 * answer with it).
 */
export interface Frame {
  pieces: Uint8Array[];
  written?: () => void;
  last?: boolean;
}

/** Encodes one response message as a Frame, or returns undefined for the generic path. */
export type FrameEncoder = (message: unknown, binary: boolean) => Frame | undefined;

/**
 * Tells whether everything written to the response so far was handed to the kernel (set by
 * the HTTP layer per request; absent, `Frame.written` callbacks are never called).
 */
export const flushedKey = createContextKey<(() => boolean) | undefined>(undefined, { description: "envd response flushed" });

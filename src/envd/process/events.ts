import { create } from "@bufbuild/protobuf";
import { ProcessEvent_DataEventSchema, ProcessEventSchema, type ProcessEvent, type ProcessEvent_DataEvent } from "../gen/process/process_pb.js";
import type { EndFields } from "./exit-status.js";
import type { Lease } from "./read-slabs.js";

/** Which output a data event carries. */
export type OutputKind = "stdout" | "stderr" | "pty";

/** `start{pid}`. */
export function startEvent(pid: number): ProcessEvent {
  return create(ProcessEventSchema, { event: { case: "start", value: { pid } } });
}

/** `data{stdout|stderr|pty}`. */
export function dataEvent(kind: OutputKind, bytes: Uint8Array): ProcessEvent {
  return create(ProcessEventSchema, { event: { case: "data", value: { output: { case: kind, value: bytes } } } });
}

/** The separate reads a coalesced data event was built from (see chunkedDataEvent). */
const CHUNKS = Symbol("envd.output.chunks");

/** The reads of a data event, and the lease on their slabs when they are views of reused slabs. */
export interface EventChunks {
  chunks: readonly Uint8Array[];
  length: number;
  lease?: Lease;
}

type Chunked = ProcessEvent_DataEvent & { [CHUNKS]?: EventChunks };

/**
 * `data{…}` over several reads without joining them: the hand-written frame writer sends the
 * reads as they are, and the payload is joined (once) only if something reads `output.value`
 * (protobuf-es for gRPC, compressed or JSON responses). Joining every coalesced event doubled
 * the bytes allocated per output byte, and with them V8's full collections.
 */
export function chunkedDataEvent(kind: OutputKind, chunks: readonly Uint8Array[], length: number, lease?: Lease): ProcessEvent {
  if (chunks.length === 1 && !lease) return dataEvent(kind, chunks[0]);
  const data: Chunked = create(ProcessEvent_DataEventSchema);
  let joined: Uint8Array | undefined;
  data.output = {
    case: kind,
    get value(): Uint8Array {
      return (joined ??= Buffer.concat(chunks, length));
    },
  } as ProcessEvent_DataEvent["output"];
  data[CHUNKS] = { chunks, length, lease };
  return create(ProcessEventSchema, { event: { case: "data", value: data } });
}

/** The reads behind a data event built by chunkedDataEvent, if it was. */
export function chunksOf(data: ProcessEvent_DataEvent): EventChunks | undefined {
  return (data as Chunked)[CHUNKS];
}

/** `end{exitCode, exited, status, error?}`. */
export function endEvent(fields: EndFields): ProcessEvent {
  return create(ProcessEventSchema, { event: { case: "end", value: fields } });
}

/** `keepalive{}`. */
export function keepaliveEvent(): ProcessEvent {
  return create(ProcessEventSchema, { event: { case: "keepalive", value: {} } });
}

/** Bytes an event holds in a subscriber's queue (payload plus a fixed overhead). */
export function eventSize(ev: ProcessEvent): number {
  const e = ev.event;
  if (e.case !== "data") return 64;
  return 64 + (chunksOf(e.value)?.length ?? e.value.output.value?.byteLength ?? 0);
}

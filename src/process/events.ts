import { create } from "@bufbuild/protobuf";
import { ProcessEventSchema, type ProcessEvent } from "../gen/process/process_pb.js";
import type { EndFields } from "./exit-status.js";

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
  return 64 + (e.case === "data" ? e.value.output.value?.byteLength ?? 0 : 0);
}

import { ConnectError, type HandlerContext } from "@connectrpc/connect";
import type { StreamCall } from "../stream/contract.js";
import { userKey } from "../auth/identity.js";
import type { ProcessEvent } from "../gen/process/process_pb.js";
import { KeepaliveReader, TICK, keepaliveIntervalMs } from "../stream/keepalive.js";
import { endEvent, keepaliveEvent, startEvent } from "./events.js";
import type { Found } from "./registry.js";

/** The pid whose events a stream carries, and the events. */
export interface EventSource {
  readonly pid: number;
  readonly events: AsyncIterableIterator<ProcessEvent>;
}

/**
 * The events of one Start or Connect stream, opened by `open()` (which may throw, ending the
 * stream with that error): `start{pid}`, then the subscription's output and end event with
 * keep-alives in idle gaps. Ends when the subscription does or the client goes away (the
 * process is unaffected); `finally` unsubscribes. A deadline that fires (Connect-Timeout-Ms)
 * ends the stream with its deadline_exceeded error. One generator for the whole stream: each
 * stacked generator would cost every event another round of promises.
 */
export async function* processEvents(open: () => Promise<EventSource> | EventSource, call: StreamCall): AsyncGenerator<{ event: ProcessEvent }> {
  const { pid, events } = await open();
  let reader: KeepaliveReader<ProcessEvent> | undefined;
  try {
    yield { event: startEvent(pid) };
    reader = new KeepaliveReader(events, keepaliveIntervalMs(call.header("keepalive-ping-interval")), call.signal);
    for (;;) {
      const r = await reader.read();
      if (r === TICK) yield { event: keepaliveEvent() };
      else if (r.done) break;
      else yield { event: r.value };
    }
    if (call.signal.aborted) throw ConnectError.from(call.signal.reason);
  } finally {
    reader?.close();
    await events.return?.();
  }
}

/** The StreamCall of an RPC that came through connect-es (connect-node's path, gRPC, gRPC-Web). */
export function streamCall(ctx: HandlerContext): StreamCall {
  return { signal: ctx.signal, header: (name) => ctx.requestHeader.get(name), user: ctx.values.get(userKey) };
}

/** The event source of a Connect: live output of a running process, or just the retained end. */
export function eventsOf(found: Found): EventSource {
  if ("live" in found) return { pid: found.live.pid, events: found.live.output.subscribe() };
  return { pid: found.exit.pid, events: once(endEvent(found.exit.end)) };
}

async function* once(event: ProcessEvent): AsyncGenerator<ProcessEvent> {
  yield event;
}

import { ConnectError, type HandlerContext } from "@connectrpc/connect";
import type { ProcessEvent } from "../gen/process/process_pb.js";
import { keepaliveIntervalMs, withKeepalive } from "../http/keepalive.js";
import { endEvent, keepaliveEvent, startEvent } from "./events.js";
import type { Found } from "./registry.js";

/**
 * The events of one Start or Connect stream: `start{pid}`, then the subscription's output
 * and end event with keep-alives in idle gaps. Ends when the subscription does or the
 * client goes away (the process is unaffected); `finally` unsubscribes. A deadline that
 * fires (Connect-Timeout-Ms) ends the stream with its deadline_exceeded error.
 */
export async function* processEvents(
  pid: number,
  events: AsyncIterableIterator<ProcessEvent>,
  ctx: HandlerContext,
): AsyncGenerator<{ event: ProcessEvent }> {
  try {
    yield { event: startEvent(pid) };
    const interval = keepaliveIntervalMs(ctx.requestHeader.get("keepalive-ping-interval"));
    for await (const event of withKeepalive(events, interval, keepaliveEvent, ctx.signal)) yield { event };
    if (ctx.signal.aborted) throw ConnectError.from(ctx.signal.reason);
  } finally {
    await events.return?.();
  }
}

/** The event source of a Connect: live output of a running process, or just the retained end. */
export function eventsOf(found: Found): { pid: number; events: AsyncIterableIterator<ProcessEvent> } {
  if ("live" in found) return { pid: found.live.pid, events: found.live.output.subscribe() };
  return { pid: found.exit.pid, events: once(endEvent(found.exit.end)) };
}

async function* once(event: ProcessEvent): AsyncGenerator<ProcessEvent> {
  yield event;
}

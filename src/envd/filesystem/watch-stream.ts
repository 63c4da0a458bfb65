import { create } from "@bufbuild/protobuf";
import { WatchDirResponseSchema, type WatchDirResponse } from "../gen/filesystem/filesystem_pb.js";
import { keepaliveIntervalMs, withKeepalive } from "../stream/keepalive.js";
import type { WatcherRegistry, WatchRequest } from "./watchers.js";

/**
 * WatchDir (envd-behaviour §6.6): arms the watch, then yields `start`, the events and
 * keepalives until the client goes away or the watch fails; the watch is closed in `finally`.
 */
export async function* watchDirStream(
  registry: WatcherRegistry,
  path: string,
  req: WatchRequest,
  keepaliveHeader: string | null,
  signal: AbortSignal,
): AsyncGenerator<WatchDirResponse> {
  const watch = await registry.open(path, req);
  try {
    yield create(WatchDirResponseSchema, { event: { case: "start", value: {} } });
    const events = (async function* () {
      for await (const ev of watch.events(signal)) {
        yield create(WatchDirResponseSchema, { event: { case: "filesystem", value: ev } });
      }
    })();
    const keepalive = () => create(WatchDirResponseSchema, { event: { case: "keepalive", value: {} } });
    yield* withKeepalive(events, keepaliveIntervalMs(keepaliveHeader), keepalive, signal);
  } finally {
    registry.release(watch);
  }
}

import { create, isMessage, type Message } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { EntryInfoSchema, FilesystemEventSchema, type EntryInfo } from "../gen/filesystem/filesystem_pb.js";

/** The User-Agent of the legacy Python SDK that expects the old, reduced filesystem schema. */
export const LEGACY_USER_AGENT = "connect-python";

/** EntryInfo reduced to the old schema: name, type and path only. */
function reduceEntry(entry: EntryInfo): EntryInfo {
  return create(EntryInfoSchema, { name: entry.name, type: entry.type, path: entry.path });
}

/** Down-converts one filesystem response message in place (entries reduced, event entries dropped). */
export function downConvert(message: Message): void {
  const m = message as unknown as Record<string, unknown>;
  if (isMessage(m.entry, EntryInfoSchema)) m.entry = reduceEntry(m.entry);
  if (Array.isArray(m.entries)) m.entries = (m.entries as EntryInfo[]).map(reduceEntry);
  if (Array.isArray(m.events)) {
    for (const e of m.events) if (isMessage(e, FilesystemEventSchema)) e.entry = undefined;
  }
  const ev = m.event as { case?: string; value?: unknown } | undefined;
  if (ev?.case === "filesystem" && isMessage(ev.value, FilesystemEventSchema)) ev.value.entry = undefined;
}

/**
 * Serves the legacy `connect-python` client the reduced filesystem schema it was built for and
 * marks the response with `X-E2B-Legacy-SDK: true` (envd-behaviour §5). Other clients are untouched.
 */
export function legacyInterceptor(): Interceptor {
  return (next) => async (req) => {
    if (req.service.typeName !== "filesystem.Filesystem" || req.header.get("user-agent") !== LEGACY_USER_AGENT) return next(req);
    const res = await next(req);
    res.header.set("X-E2B-Legacy-SDK", "true");
    if (!res.stream) {
      downConvert(res.message);
      return res;
    }
    const inner = res.message;
    return {
      ...res,
      message: (async function* () {
        for await (const m of inner) {
          downConvert(m);
          yield m;
        }
      })(),
    };
  };
}

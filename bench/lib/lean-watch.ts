import http from "node:http";
import { create, fromBinary, fromJsonString, toBinary, toJsonString } from "@bufbuild/protobuf";
import { WatchDirRequestSchema, WatchDirResponseSchema } from "../../src/envd/gen/filesystem/filesystem_pb.js";

/**
 * A lean Connect client for Filesystem.WatchDir over HTTP/1.1 (keep-alive agent): it splits the
 * frames itself and decodes every message with protobuf-es (binary or JSON), counting
 * filesystem events until `signal` aborts. What a remote watcher costs the daemon, without
 * connect-node's own reader on the same two cores (see connect-reader.ts for Start).
 */
export function leanWatch(baseUrl: string, path: string, binary: boolean, signal: AbortSignal): Promise<number> {
  const msg = create(WatchDirRequestSchema, { path, recursive: true });
  const payload = binary ? Buffer.from(toBinary(WatchDirRequestSchema, msg)) : Buffer.from(toJsonString(WatchDirRequestSchema, msg));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(payload.length, 1);
  let events = 0;
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${baseUrl}/filesystem.Filesystem/WatchDir`,
      { method: "POST", signal, headers: { "content-type": `application/connect+${binary ? "proto" : "json"}`, authorization: "Basic dXNlcjo=" } },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`WatchDir answered HTTP ${res.statusCode}`));
        let pending: Buffer = Buffer.alloc(0);
        res.on("data", (chunk: Buffer) => {
          pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
          while (pending.length >= 5) {
            const len = pending.readUInt32BE(1);
            if (pending.length < 5 + len) break;
            const flags = pending[0];
            const data = pending.subarray(5, 5 + len);
            pending = pending.subarray(5 + len);
            if (flags & 2) {
              const end = JSON.parse(data.toString()) as { error?: { code: string; message?: string } };
              if (end.error) reject(new Error(`watch ended with ${end.error.code}: ${end.error.message ?? ""}`));
              continue;
            }
            const m = binary ? fromBinary(WatchDirResponseSchema, data) : fromJsonString(WatchDirResponseSchema, data.toString());
            if (m.event.case === "filesystem") events++;
          }
        });
        res.on("end", () => resolve(events));
        res.on("error", () => resolve(events));
      },
    );
    req.on("error", (err) => (signal.aborted ? resolve(events) : reject(err)));
    req.end(Buffer.concat([head, payload]));
  });
}

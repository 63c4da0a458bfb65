import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Process } from "../../../src/envd/gen/process/process_pb.js";
import { startDaemon, type Daemon } from "../helpers/daemon.js";
import { PIPE_CHUNK_BYTES } from "../../../src/envd/process/limits.js";

let d: Daemon;

before(async () => {
  d = await startDaemon();
});
after(async () => {
  await d?.stop();
});

test("1 GiB of output arrives with the exact byte count over Connect binary", { timeout: 120_000 }, async () => {
  // HTTP/1.1 and no response compression: this measures the daemon's stream, not zlib or the
  // h2c relay (each roughly doubles the time); other tests cover binary over h2c.
  const transport = createConnectTransport({ baseUrl: d.url, httpVersion: "1.1", useBinaryFormat: true, acceptCompression: [] });
  const client = createClient(Process, transport);
  let bytes = 0;
  let events = 0;
  let exitCode: number | undefined;
  for await (const r of client.start({ process: { cmd: "head", args: ["-c", "1G", "/dev/zero"] } })) {
    const e = r.event?.event;
    if (e?.case === "data" && e.value.output.case === "stdout") {
      bytes += e.value.output.value.byteLength;
      events++;
      assert.ok(e.value.output.value.byteLength <= PIPE_CHUNK_BYTES, "pipe output comes in chunks of at most PIPE_CHUNK_BYTES");
    }
    if (e?.case === "end") exitCode = e.value.exitCode;
  }
  assert.equal(bytes, 1024 ** 3);
  assert.ok(events >= 1024 ** 3 / PIPE_CHUNK_BYTES);
  assert.equal(exitCode, 0);
});

import { test } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { once } from "node:events";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { fileURLToPath } from "node:url";
import { sendWhole } from "../../../src/envd/http/node-call.js";

// The server runs on a worker thread: its event loop can be held while this thread's client reads.

const HOLD_MS = 400;

/**
 * An HTTP/2 server answering every request whole (with sendWhole, or Node's compatibility
 * response), then holding its event loop for HOLD_MS from a setImmediate queued in the same turn:
 * whatever of the answer is left for a later turn arrives only after the hold.
 */
function serve(compat: boolean): void {
  const server = http2.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.setHeader("x-set-before", "yes");
      if (compat) {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("whole");
      } else sendWhole(req, res, 200, { "content-type": "text/plain" }, Buffer.from("whole"));
      setImmediate(() => {
        const until = performance.now() + HOLD_MS;
        while (performance.now() < until) {
          // a long turn of a busy daemon
        }
        parentPort!.postMessage("held");
      });
    });
  });
  server.listen(0, "127.0.0.1", () => parentPort!.postMessage((server.address() as { port: number }).port));
}

/** Whether the answer's end reached the client before the server's loop was let go, and what came. */
async function answerBeforeHold(compat: boolean): Promise<{ before: boolean; status: number; header: unknown; body: string }> {
  const worker = new Worker(fileURLToPath(import.meta.url), { workerData: { compat } });
  const [port] = (await once(worker, "message")) as [number];
  const session = http2.connect(`http://127.0.0.1:${port}`);
  let held = false;
  worker.once("message", () => (held = true));
  try {
    const req = session.request({ ":method": "POST", ":path": "/" });
    req.end();
    const [headers] = (await once(req, "response")) as [http2.IncomingHttpHeaders];
    let body = "";
    req.setEncoding("utf8").on("data", (c: string) => (body += c));
    await once(req, "end");
    const before = !held;
    return { before, status: Number(headers[":status"]), header: headers["x-set-before"], body };
  } finally {
    session.destroy();
    await worker.terminate();
  }
}

if (isMainThread) {
  test("an HTTP/2 answer sent whole ends in its own turn: no trailers left for the next one", async () => {
    const whole = await answerBeforeHold(false);
    assert.deepEqual(whole, { before: true, status: 200, header: "yes", body: "whole" });
  });

  test("(the reason) Node's compatibility response leaves the end of the answer for the next turn", async () => {
    const compat = await answerBeforeHold(true);
    assert.equal(compat.body, "whole");
    assert.equal(compat.before, false, "if this fails, Node sends the compatibility response's trailers at once: sendWhole may go");
  });
} else {
  serve((workerData as { compat: boolean }).compat);
}

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import type { IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { constants } from "node:http2";
import { DOMAIN, startFront, target, type Front } from "../helpers/proxy-front.js";
import { startH2cTarget, startHttp1Target } from "../helpers/targets.js";

describe("proxy streaming", () => {
  let front: Front;
  let h2c: Awaited<ReturnType<typeof startH2cTarget>>;
  let written = 0;
  /** Times the firehose waited for 'drain', and whether it waits now. */
  const firehose = { drainWaits: 0, waiting: false };
  let tickerGo: (() => void) | undefined;
  /** Emits "aborted" when a /hang request is ended before its answer finished. */
  const hang = new EventEmitter();
  /** Emits "received" with the byte count as /pieces gets each part of its body. */
  const pieces = new EventEmitter();
  let h1: Awaited<ReturnType<typeof startHttp1Target>>;

  before(async () => {
    h1 = await startHttp1Target((req, res) => {
      if (req.url === "/firehose") {
        // Writes until the client stops reading; counts what left so the test can see backpressure.
        written = 0;
        const chunk = Buffer.alloc(64 * 1024, 7);
        const pump = () => {
          firehose.waiting = false;
          while (written < 256 * 1024 * 1024) {
            written += chunk.length;
            if (!res.write(chunk)) {
              firehose.drainWaits++;
              firehose.waiting = true;
              return void res.once("drain", pump);
            }
          }
          res.end();
        };
        res.on("close", () => (written = -written));
        pump();
        return true;
      }
      if (req.url === "/ticker") {
        // One chunk now, the rest only when the test says so: the first must arrive before the end.
        res.writeHead(200, { "content-type": "text/plain" });
        res.write("first\n");
        tickerGo = () => res.end("last\n");
        return true;
      }
      if (req.url === "/pieces") {
        // As /sha256, telling the test how much has arrived so that it sends the next piece only then.
        const h = createHash("sha256");
        let n = 0;
        req.on("data", (c: Buffer) => {
          h.update(c);
          n += c.length;
          pieces.emit("received", n);
        });
        req.on("end", () => res.end(JSON.stringify({ sha256: h.digest("hex"), bytes: n })));
        return true;
      }
      if (req.url === "/hang") {
        res.on("close", () => {
          if (!res.writableFinished) hang.emit("aborted");
        });
        res.writeHead(200);
        res.write("started");
        return true;
      }
      return false;
    });
    h2c = await startH2cTarget();
    front = await startFront();
    front.targets.set("istream", target("istream", h2c.port));
  });
  after(async () => {
    await front.close();
    h1.server.close();
    h2c.server.close();
  });

  const host = (port: number) => `${port}-istream.${DOMAIN}:${front.port}`;

  test("a large upload sent in pieces, each after the last arrived, arrives whole (HTTP/1.1, chunked)", async () => {
    const body = randomBytes(6 * 1024 * 1024);
    let received = 0;
    pieces.on("received", (n: number) => (received = n));
    const arrived = (n: number) => new Promise<void>((resolve) => {
      const check = () => received >= n && (pieces.off("received", check), resolve());
      pieces.on("received", check);
      check();
    });
    const answer = await new Promise<string>((resolve, reject) => {
      const req = httpsRequest(front.options(host(h1.port), "/pieces", { method: "POST" }), (res) => {
        let text = "";
        res.on("data", (c: Buffer) => (text += c));
        res.on("end", () => resolve(text));
      });
      req.on("error", reject);
      void (async () => {
        for (let i = 0; i < body.length; i += 512 * 1024) {
          if (!req.write(body.subarray(i, i + 512 * 1024))) await new Promise((r) => req.once("drain", r));
          await arrived(Math.min(body.length, i + 512 * 1024));
        }
        req.end();
      })();
    });
    assert.deepEqual(JSON.parse(answer), { sha256: createHash("sha256").update(body).digest("hex"), bytes: body.length });
  });

  test("answers stream: the first chunk arrives while the sandbox still holds the rest", async () => {
    const got: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const req = httpsRequest(front.options(host(h1.port), "/ticker"), (res) => {
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          got.push(c);
          if (got.length === 1) tickerGo?.();
        });
        res.on("end", () => resolve());
      });
      req.on("error", reject);
      req.end();
    });
    assert.equal(got.join(""), "first\nlast\n");
  });

  test("a client that stops reading stops the sandbox's writes (backpressure, no buffering in the proxy)", async () => {
    const s = front.h2session();
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = httpsRequest(front.options(host(h1.port), "/firehose"), (r) => {
        r.pause();
        resolve(r);
      });
      req.on("error", reject);
      req.end();
    });
    // The sandbox is stalled once it has waited for the same 'drain' across five requests that
    // went through the proxy and the sandbox's server meanwhile (each lets both move data if they could).
    const limit = 32 * 1024 * 1024;
    let quiet = 0;
    let last = -1;
    while (quiet < 5 && written >= 0 && written < limit) {
      assert.equal((await front.h2(s, host(h1.port), "/seen")).status, 200);
      if (firehose.waiting && firehose.drainWaits === last) quiet++;
      else [quiet, last] = [0, firehose.drainWaits];
    }
    // Socket buffers on three hops allow a few MiB; a proxy that buffered would have taken it all.
    assert.ok(written > 0 && written < limit, `the sandbox wrote ${written} bytes to a client that read nothing`);
    res.destroy();
    s.close();
  });

  test("HTTP/2 to envd is full duplex over h2c, with trailers (gRPC status) relayed", async () => {
    const s = front.h2session();
    const stream = s.request({ ":method": "POST", ":path": "/echo", ":authority": host(h2c.port), "content-type": "application/grpc", te: "trailers" });
    const echoes: string[] = [];
    let trailers: Record<string, unknown> = {};
    stream.on("trailers", (t) => (trailers = t));
    const next = () => new Promise<string>((resolve) => stream.once("data", (c: Buffer) => resolve(c.toString())));
    for (const word of ["one", "two", "three"]) {
      stream.write(word);
      echoes.push(await next());
    }
    stream.end();
    await new Promise((r) => stream.on("close", r));
    assert.deepEqual(echoes, ["one", "two", "three"]);
    assert.equal(trailers["grpc-status"], "0");
    assert.equal(trailers["grpc-message"], "done");
    s.close();
  });

  test("a client's stream reset reaches the sandbox, and the session keeps working", async () => {
    const s = front.h2session();
    const aborted = new Promise((r) => hang.once("aborted", r));
    const stream = s.request({ ":method": "GET", ":path": "/hang", ":authority": host(h1.port) });
    await new Promise((r) => stream.once("data", r));
    stream.close(constants.NGHTTP2_CANCEL);
    // The test's own timeout ends it if the upstream request is never ended.
    await aborted;
    const r = await front.h2(s, host(h1.port), "/seen");
    assert.equal(r.status, 200);
    s.close();
  });

  test("a sandbox's stream reset after the answer began resets the client's stream", async () => {
    const s = front.h2session();
    const stream = s.request({ ":method": "GET", ":path": "/reset-after-headers", ":authority": host(h2c.port) });
    stream.on("data", () => undefined);
    stream.on("error", () => undefined);
    const code = await new Promise<number>((resolve) => stream.on("close", () => resolve(stream.rstCode)));
    assert.notEqual(code, constants.NGHTTP2_NO_ERROR);
    const r = await front.h2(s, host(h2c.port), "/seen");
    assert.equal(r.status, 200);
    s.close();
  });
});

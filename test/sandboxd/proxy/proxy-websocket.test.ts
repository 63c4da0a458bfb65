import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Duplex } from "node:stream";
import { DOMAIN, startFront, target, type Front } from "../helpers/proxy-front.js";
import { listen } from "../helpers/targets.js";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** One masked client text frame (payload < 126 bytes). */
function clientFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = randomBytes(4);
  const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]));
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, masked]);
}

/** Reads one unmasked server text frame (payload < 126 bytes) from the socket. */
function readFrame(socket: Duplex): Promise<string> {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    const onData = (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      if (buf.length >= 2 && buf.length >= 2 + (buf[1] & 0x7f)) {
        socket.off("data", onData);
        resolve(buf.subarray(2, 2 + (buf[1] & 0x7f)).toString());
      }
    };
    socket.on("data", onData);
  });
}

/** A WebSocket server that answers each text frame with "echo: <text>"; /no-upgrade declines. */
function echoServer(): Server {
  const server = createServer((_req, res) => res.end("plain"));
  server.on("upgrade", (req, socket: Duplex) => {
    if (req.url === "/no-upgrade") {
      socket.end("HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\nConnection: close\r\n\r\nno upgrade\n");
      return;
    }
    const accept = createHash("sha1").update(String(req.headers["sec-websocket-key"]) + GUID).digest("base64");
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\nX-Seen-Host: ${req.headers.host}\r\n\r\n`);
    let buf = Buffer.alloc(0);
    socket.on("data", (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      while (buf.length >= 6 && buf.length >= 6 + (buf[1] & 0x7f)) {
        const len = buf[1] & 0x7f;
        const mask = buf.subarray(2, 6);
        const text = Buffer.from(buf.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4])).toString();
        buf = buf.subarray(6 + len);
        const reply = Buffer.from(`echo: ${text}`);
        socket.write(Buffer.concat([Buffer.from([0x81, reply.length]), reply]));
      }
    });
    socket.on("error", () => undefined);
  });
  return server;
}

describe("proxy WebSocket upgrades", () => {
  let front: Front;
  let server: Server;
  let port: number;

  before(async () => {
    server = echoServer();
    port = await listen(server);
    front = await startFront();
    front.targets.set("iws", target("iws", 49983, { maskRequestHost: "ws.local" }));
  });
  after(async () => {
    await front.close();
    server.close();
  });

  /** Sends the Upgrade request through the proxy: resolves with the 101's socket, or the refusal. */
  const upgrade = (host: string, path: string) =>
    new Promise<{ socket?: Duplex; status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
      const req = httpsRequest(
        front.options(host, path, {
          headers: { connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13", "sec-websocket-key": randomBytes(16).toString("base64") },
        }),
      );
      req.on("upgrade", (res, socket: Duplex) => resolve({ socket, status: res.statusCode ?? 0, headers: res.headers, body: "" }));
      req.on("response", (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
      req.on("error", reject);
      req.end();
    });

  test("an upgrade is relayed raw both ways (echo of several frames), with the sandbox's Host mask applied", async () => {
    const r = await upgrade(`${port}-iws.${DOMAIN}:${front.port}`, "/ws");
    assert.equal(r.status, 101);
    assert.equal(r.headers["x-seen-host"], "ws.local");
    const socket = r.socket!;
    for (const word of ["hello", "world", "x".repeat(100)]) {
      socket.write(clientFrame(word));
      assert.equal(await readFrame(socket), `echo: ${word}`);
    }
    socket.destroy();
  });

  test("a declined upgrade is relayed as the sandbox answered it", async () => {
    const r = await upgrade(`${port}-iws.${DOMAIN}`, "/no-upgrade");
    assert.equal(r.status, 400);
    assert.equal(r.body, "no upgrade\n");
  });

  test("upgrades to unknown sandboxes, closed ports and non-sandbox hosts get the proxy's errors", async () => {
    const unknown = await upgrade(`${port}-inope.${DOMAIN}`, "/ws");
    assert.equal(unknown.status, 502);
    assert.equal(unknown.body, '{"sandboxId":"inope","message":"The sandbox was not found","code":502}');
    server.close();
    const closed = await upgrade(`${port}-iws.${DOMAIN}`, "/ws");
    assert.equal(closed.status, 502);
    assert.equal(JSON.parse(closed.body).message, "The sandbox is running but port is not open");
    server = echoServer();
    const api = await upgrade(`api.${DOMAIN}`, "/ws");
    assert.equal(api.status, 404);
    const bad = await upgrade(`nodash.${DOMAIN}`, "/ws");
    assert.equal(bad.status, 400);
    assert.equal(bad.body, "Invalid host\n");
  });
});

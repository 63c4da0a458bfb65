// The warm pool's warm-up command over h2c: against the real envd (exit codes, the user, the
// token), and against hostile h2c servers (bounded time and bytes).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Http2Server, type ServerHttp2Stream } from "node:http2";
import { initEnvd } from "../../../src/sandboxd/envd-client/init.js";
import { runOverH2c } from "../../../src/sandboxd/envd-client/warm-up.js";
import { startDaemon, type Daemon } from "../../envd/helpers/daemon.js";

const canRun = process.getuid?.() === 0 ? false : "envd runs commands as the user `user`: needs root";

describe("the warm-up command over h2c, against the real envd", { skip: canRun }, () => {
  let d: Daemon;
  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    await d.stop();
  });

  test("runs bash -l -c as the user and resolves with the exit code", async () => {
    const t = { ip: "127.0.0.1", port: d.port, user: "user" };
    assert.equal(await runOverH2c(t, "true", 10_000), 0);
    assert.equal(await runOverH2c(t, "test \"$(id -un)\" = user && exit 3", 10_000), 3);
  });

  test("once a token is set: refused without it, runs with it", async () => {
    await initEnvd({ ip: "127.0.0.1", port: d.port, accessToken: "warm-up-token" });
    const t = { ip: "127.0.0.1", port: d.port, user: "user" };
    await assert.rejects(runOverH2c(t, "true", 10_000), /envd answered 401|unauthenticated|ended the stream/);
    assert.equal(await runOverH2c({ ...t, accessToken: "warm-up-token" }, "exit 0", 10_000), 0);
  });
});

describe("the warm-up command over h2c, against hostile servers", () => {
  let server: Http2Server;
  let port = 0;
  let behave: (s: ServerHttp2Stream) => void = () => undefined;
  before(async () => {
    server = createServer();
    server.on("stream", (s) => {
      s.on("error", () => undefined);
      behave(s);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as { port: number }).port;
  });
  after(async () => {
    await new Promise((r) => server.close(r));
  });
  const t = () => ({ ip: "127.0.0.1", port, user: "user" });

  test("an error status is refused with it", async () => {
    behave = (s) => s.respond({ ":status": 503 }, { endStream: true });
    await assert.rejects(runOverH2c(t(), "true", 5000), /envd answered 503/);
  });

  test("a message announced larger than 1 MiB fails at once, without reading it", async () => {
    behave = (s) => {
      s.respond({ ":status": 200, "content-type": "application/connect+json" });
      const head = Buffer.alloc(5);
      head.writeUInt32BE(64 * 1024 * 1024, 1);
      s.write(head);
    };
    await assert.rejects(runOverH2c(t(), "true", 5000), /more than/);
  });

  test("an endless stream of small messages without an end event stops at the deadline", async () => {
    let timer: NodeJS.Timeout | undefined;
    behave = (s) => {
      s.respond({ ":status": 200, "content-type": "application/connect+json" });
      const msg = Buffer.from(JSON.stringify({ event: { data: { stdout: "eA==" } } }));
      const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, msg.length]), msg]);
      timer = setInterval(() => !s.destroyed && s.write(frame), 5);
      s.on("close", () => clearInterval(timer));
    };
    await assert.rejects(runOverH2c(t(), "true", 300), /no answer within 300 ms/);
    clearInterval(timer);
  });

  test("a stream that ends before the process did is an error", async () => {
    behave = (s) => {
      s.respond({ ":status": 200, "content-type": "application/connect+json" });
      s.end();
    };
    await assert.rejects(runOverH2c(t(), "true", 5000), /ended before the process did/);
  });

  test("nothing listening: the dial error", async () => {
    const closed = await new Promise<number>((resolve) => {
      const tmp = createServer();
      tmp.listen(0, "127.0.0.1", () => {
        const p = (tmp.address() as { port: number }).port;
        tmp.close(() => resolve(p));
      });
    });
    await assert.rejects(runOverH2c({ ip: "127.0.0.1", port: closed, user: "user" }, "true", 5000), /ECONNREFUSED/);
  });
});

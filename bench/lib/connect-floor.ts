// The RPC-framework floor of a command round trip: a bare connect-node server (its own process,
// like the daemon) whose Process.Start spawns the command the way the spawn server does and
// streams start, output and end events. No envd code, no access log, no users, no checks: what
// any daemon built on connect-node pays for one Start, measured with the same clients. Run
// directly, this file is the server (h2c) and prints its port.
import { spawn } from "node:child_process";
import http2 from "node:http2";
import { fileURLToPath } from "node:url";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Process, StartResponseSchema } from "../../src/envd/gen/process/process_pb.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";

type Event = NonNullable<MessageInitShape<typeof StartResponseSchema>["event"]>["event"];
const ev = (event: Event) => create(StartResponseSchema, { event: { event } });

/** Items pushed by callbacks, read as an async iterable (ends at `end()`). */
class Queue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private wake: (() => void) | undefined;
  private ended = false;
  push(item: T): void {
    this.items.push(item);
    this.wake?.();
  }
  end(): void {
    this.ended = true;
    this.wake?.();
  }
  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      while (this.items.length) yield this.items.shift()!;
      if (this.ended) return;
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }
}

function serve(): void {
  const [uidText, gidText] = process.argv.slice(2);
  const uid = uidText ? Number(uidText) : undefined;
  const gid = gidText ? Number(gidText) : undefined;
  const handler = connectNodeAdapter({
    routes: (router) => {
      router.service(Process, {
        async *start(req) {
          const cfg = req.process!;
          const child = spawn(cfg.cmd, cfg.args, { stdio: ["ignore", "pipe", "pipe"], detached: true, uid, gid });
          const out = new Queue<Buffer>();
          let open = 3;
          let exitCode = 0;
          const done = (): void => void (--open === 0 && out.end());
          child.once("error", () => out.end());
          child.once("exit", (c) => {
            exitCode = c ?? -1;
            done();
          });
          child.stdout!.on("data", (b: Buffer) => out.push(b)).once("close", done);
          child.stderr!.resume().once("close", done);
          yield ev({ case: "start", value: { pid: child.pid ?? 0 } });
          for await (const b of out) yield ev({ case: "data", value: { output: { case: "stdout", value: b } } });
          yield ev({ case: "end", value: { exitCode, exited: true, status: `exit status ${exitCode}` } });
        },
      });
    },
  });
  const server = http2.createServer(handler);
  server.listen(0, "127.0.0.1", () => {
    const addr = server.address();
    process.stdout.write(`${typeof addr === "object" && addr ? addr.port : 0}\n`);
  });
  process.on("SIGTERM", () => process.exit(0));
}

/** Starts this file as a separate Node process spawning as `uid`/`gid`; it speaks h2c. */
export function startConnectFloor(uid?: number, gid?: number): Promise<ServerProcess> {
  return startServerProcess(fileURLToPath(import.meta.url), uid === undefined ? [] : [String(uid), String(gid ?? uid)]);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) serve();

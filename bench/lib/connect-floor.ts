// The RPC-framework floor of a command round trip: a bare connect-node server (its own process,
// like the daemon; h2c, as the daemon's binary clients use) whose Process.Start spawns the
// command the way the spawn server does and streams start{pid} and end{exitCode} events. No
// envd code at all: what any daemon built on connect-node pays for one Start round trip. Run
// directly, this file is the server and prints its port.
import { spawn } from "node:child_process";
import http2 from "node:http2";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Process, ProcessEventSchema, type StartResponse } from "../../src/gen/process/process_pb.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";

function serve(): void {
  const [uidText, gidText] = process.argv.slice(2);
  const uid = uidText ? Number(uidText) : undefined;
  const gid = gidText ? Number(gidText) : undefined;
  const handler = connectNodeAdapter({
    routes: (router) =>
      router.service(Process, {
        async *start(req): AsyncGenerator<Partial<StartResponse>> {
          const cfg = req.process!;
          const child = spawn(cfg.cmd, cfg.args, { stdio: ["ignore", "pipe", "pipe"], detached: true, uid, gid });
          const exited = new Promise<number>((resolve, reject) => {
            let open = 3;
            let code = 0;
            const done = (): void => void (--open === 0 && resolve(code));
            child.once("error", reject);
            child.once("exit", (c) => {
              code = c ?? -1;
              done();
            });
            child.stdout!.resume().once("close", done);
            child.stderr!.resume().once("close", done);
          });
          yield { event: create(ProcessEventSchema, { event: { case: "start", value: { pid: child.pid ?? 0 } } }) };
          const exitCode = await exited;
          yield { event: create(ProcessEventSchema, { event: { case: "end", value: { exitCode, exited: true, status: `exit status ${exitCode}` } } }) };
        },
      }),
  });
  const server = http2.createServer(handler);
  server.listen(0, "127.0.0.1", () => {
    const addr = server.address();
    process.stdout.write(`${typeof addr === "object" && addr ? addr.port : 0}\n`);
  });
  process.on("SIGTERM", () => process.exit(0));
}

/** Starts this file as a separate Node process spawning as `uid`/`gid`. */
export function startConnectFloor(uid?: number, gid?: number): Promise<ServerProcess> {
  return startServerProcess(fileURLToPath(import.meta.url), uid === undefined ? [] : [String(uid), String(gid ?? uid)]);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) serve();

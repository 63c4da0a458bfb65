// The command round-trip floor: a bare Node HTTP server that, per GET /run, spawns /bin/true the
// way the daemon does (own session, stdout/stderr pipes, as uid/gid given on the command line),
// waits for its exit and both pipes' EOF, and answers with the exit code. No RPC framework, no
// streaming, no envd. Run as its own process (like the daemon), it prints its port on stdout.
import { spawn } from "node:child_process";
import http from "node:http";
import { fileURLToPath } from "node:url";
import { startServerProcess, type ServerProcess } from "./server-process.js";

function run(uid: number | undefined, gid: number | undefined): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn("/bin/true", [], { stdio: ["ignore", "pipe", "pipe"], detached: true, uid, gid });
    let open = 3;
    let code: number | null = null;
    const done = (): void => {
      if (--open === 0) resolve(code);
    };
    child.once("error", reject);
    child.once("exit", (c) => {
      code = c;
      done();
    });
    child.stdout!.resume().once("close", done);
    child.stderr!.resume().once("close", done);
  });
}

function serve(): void {
  const [uidText, gidText] = process.argv.slice(2);
  const uid = uidText ? Number(uidText) : undefined;
  const gid = gidText ? Number(gidText) : undefined;
  const server = http.createServer((req, res) => {
    run(uid, gid).then(
      (code) => res.end(String(code)),
      (err: Error) => {
        res.writeHead(500);
        res.end(err.message);
      },
    );
  });
  server.listen(0, "127.0.0.1", () => {
    const addr = server.address();
    process.stdout.write(`${typeof addr === "object" && addr ? addr.port : 0}\n`);
  });
  process.on("SIGTERM", () => process.exit(0));
}

/** A running spawn server. */
export type SpawnServer = ServerProcess;

/** Starts this file as a separate Node process spawning as `uid`/`gid` (same Node as the daemon). */
export function startSpawnServer(uid?: number, gid?: number): Promise<SpawnServer> {
  return startServerProcess(fileURLToPath(import.meta.url), uid === undefined ? [] : [String(uid), String(gid ?? uid)]);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) serve();

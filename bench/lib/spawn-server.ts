// The command round-trip floor: a bare Node HTTP server that, per GET /run, spawns /bin/true the
// way the daemon does (own session, stdout/stderr pipes, as uid/gid given on the command line),
// waits for its exit and both pipes' EOF, and answers with the exit code. No RPC framework, no
// streaming, no envd. Run as its own process (like the daemon), it prints its port on stdout.
// With `native`, it spawns with envd's own fork-free spawn (native/spawn/spawn.c) instead of
// Node's: the floor for the daemon's way of starting processes.
import { spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import http from "node:http";
import { Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { addonExtra } from "../../src/envd/platform/addon.js";
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

/** The same with the addon's spawn: pipes of its own, the exit seen through a pidfd. */
function runNative(uid: number | undefined, gid: number | undefined): Promise<number | null> {
  const pipe = addonExtra("pipe")!;
  const [outR, outW] = pipe(0);
  const [errR, errW] = pipe(0);
  const devNull = openSync("/dev/null", "r");
  return new Promise((resolve, reject) => {
    let open = 3;
    let code: number | null = null;
    const done = (): void => {
      if (--open === 0) resolve(code);
    };
    try {
      const env = Object.entries(process.env).map(([k, v]) => `${k}=${v}`);
      addonExtra("spawn")!("/bin/true", ["/bin/true"], env, "/", uid ?? -1, gid ?? -1, [devNull, outW, errW], true, (c) => {
        code = c;
        done();
      });
    } catch (e) {
      reject(e as Error);
    } finally {
      for (const fd of [outW, errW, devNull]) closeSync(fd);
    }
    for (const fd of [outR, errR]) new Socket({ fd, readable: true, writable: false }).resume().once("close", done);
  });
}

function serve(): void {
  const native = process.argv[2] === "native";
  const [uidText, gidText] = process.argv.slice(native ? 3 : 2);
  const uid = uidText ? Number(uidText) : undefined;
  const gid = gidText ? Number(gidText) : undefined;
  const server = http.createServer((req, res) => {
    (native ? runNative : run)(uid, gid).then(
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

/**
 * Starts this file as a separate Node process spawning as `uid`/`gid` (same Node as the daemon),
 * with Node's spawn or, `native`, with envd's.
 */
export function startSpawnServer(uid?: number, gid?: number, native = false): Promise<SpawnServer> {
  const ids = uid === undefined ? [] : [String(uid), String(gid ?? uid)];
  return startServerProcess(fileURLToPath(import.meta.url), native ? ["native", ...ids] : ids);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) serve();

// The plain JSON-throughput reference: a minimal Node HTTP server (its own process, like the daemon) that
// pipes `head -c size /dev/zero` to the response as base64 text, one line per pipe read, and a
// client that decodes every line. Any protocol that carries output as base64 text (Connect JSON
// does) pays this in kind: the 4/3 inflation and an encode plus a decode per byte, on the same
// two cores as the client. Run directly, this file is the server and prints its port.
import { spawn } from "node:child_process";
import { startServerProcess, type ServerProcess } from "./server-process.js";
import { socketRequest } from "./socket-http.js";
import http from "node:http";
import { fileURLToPath } from "node:url";

/** Streams `size` bytes of /dev/zero as base64 lines until the command exits. */
function serve(res: http.ServerResponse, size: string): void {
  const child = spawn("/usr/bin/head", ["-c", size, "/dev/zero"], { stdio: ["ignore", "pipe", "ignore"] });
  res.writeHead(200, { "content-type": "text/plain" });
  child.stdout.on("data", (chunk: Buffer) => {
    if (!res.write(chunk.toString("base64") + "\n")) {
      child.stdout.pause();
      res.once("drain", () => child.stdout.resume());
    }
  });
  child.stdout.once("end", () => res.end());
}

/** Starts the ceiling server as a child process; resolves with its URL and a stop function. */
export function startBase64Ceiling(): Promise<ServerProcess> {
  return startServerProcess(fileURLToPath(import.meta.url));
}

/** Reads the ceiling stream, decoding every line; resolves with the decoded byte count. */
export async function readBase64Ceiling(url: string, size: number): Promise<number> {
  let bytes = 0;
  let rest = "";
  const status = await socketRequest(url, `/exec?size=${size}`, { method: "GET" }, (chunk) => {
    const lines = (rest + chunk.toString("latin1")).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) bytes += Buffer.from(line, "base64").length;
  });
  if (status !== 200) throw new Error(`base64 ceiling answered HTTP ${status}`);
  return bytes;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const server = http.createServer((req, res) => serve(res, new URL(req.url ?? "/", "http://x").searchParams.get("size") ?? "0"));
  server.listen(0, "127.0.0.1", () => {
    const addr = server.address();
    process.stdout.write(`${typeof addr === "object" && addr ? addr.port : 0}\n`);
  });
}

// The file-transfer baseline: a minimal Node HTTP server doing the same work as /files with no
// framework, no auth, no temp file or metadata. Run as its own process (like the daemon), it
// prints its port on stdout. GET /down?path=&gzip=1 streams a file; POST /up?path=&mode= stores
// the body (octet | gzip | multipart). GET /exec?size= pipes `head -c size /dev/zero` to the response
// (a plain Node server streaming a command's output over HTTP, with Node's own pipe reads).
import { spawn } from "node:child_process";
import http from "node:http";
import { createReadStream, createWriteStream, statSync } from "node:fs";
import { pipeline } from "node:stream/promises";
import { createGunzip, createGzip } from "node:zlib";
import { Busboy, type BusboyFileStream, type BusboyHeaders } from "@fastify/busboy";

const CHUNK = 256 * 1024;

async function up(req: http.IncomingMessage, path: string, mode: string): Promise<void> {
  if (mode === "octet") return pipeline(req, createWriteStream(path));
  if (mode === "gzip") return pipeline(req, createGunzip(), createWriteStream(path));
  await new Promise<void>((resolve, reject) => {
    const bb = Busboy({ headers: req.headers as BusboyHeaders, fileHwm: CHUNK });
    const writes: Promise<void>[] = [];
    bb.on("file", (_name: string, file: BusboyFileStream) => writes.push(pipeline(file, createWriteStream(path))));
    bb.on("finish", () => Promise.all(writes).then(() => resolve(), reject));
    bb.on("error", reject);
    req.pipe(bb);
  });
}

async function down(res: http.ServerResponse, path: string, gzip: boolean): Promise<void> {
  // Sized first: a missing file fails here, before a read stream exists to emit an unheard error.
  const size = statSync(path).size;
  const src = createReadStream(path, { highWaterMark: CHUNK });
  if (gzip) {
    res.writeHead(200, { "content-type": "application/octet-stream", "content-encoding": "gzip" });
    return pipeline(src, createGzip(), res);
  }
  res.writeHead(200, { "content-type": "application/octet-stream", "content-length": size });
  return pipeline(src, res);
}

function exec(res: http.ServerResponse, size: string): Promise<void> {
  const child = spawn("/usr/bin/head", ["-c", size, "/dev/zero"], { stdio: ["ignore", "pipe", "ignore"] });
  res.writeHead(200, { "content-type": "application/octet-stream" });
  return pipeline(child.stdout, res);
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url ?? "/", "http://x");
  if (url.pathname === "/exec") {
    exec(res, url.searchParams.get("size") ?? "0").catch(() => res.destroy());
    return;
  }
  const path = url.searchParams.get("path") ?? "";
  const work =
    req.method === "POST" ? up(req, path, url.searchParams.get("mode") ?? "octet").then(() => res.end("[]")) : down(res, path, url.searchParams.get("gzip") === "1");
  work.catch((err: Error) => {
    if (!res.headersSent) res.writeHead(500);
    res.end(String(err.message));
  });
});
server.listen(0, "127.0.0.1", () => {
  const addr = server.address();
  process.stdout.write(`${typeof addr === "object" && addr ? addr.port : 0}\n`);
});
process.on("SIGTERM", () => process.exit(0));

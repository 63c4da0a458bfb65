import net from "node:net";
import { ChunkedBody } from "./chunked-body.js";

/** One read buffer for every socket request of this process: reads run one at a time. */
let readBuffer: Buffer | undefined;

/** A request for `socketRequest`. */
export interface SocketRequest {
  method: "GET" | "POST";
  headers?: Record<string, string>;
  body?: Buffer;
}

/**
 * One HTTP/1.1 request over a socket of its own (`Connection: close`) with a minimal response
 * reader (`ChunkedBody`), read with `onread` into one reused 1 MiB buffer: no Buffer per read,
 * no stream machinery. For long streams, where Node's http client (a fresh 64 KiB Buffer per
 * read, V8 external memory, mark-compacts) costs the client more than the server it measures.
 * `sink` gets the body, with the status, as views valid only during the call; resolves with the status once the
 * server has closed the connection after a whole response.
 */
export function socketRequest(baseUrl: string, path: string, req: SocketRequest, sink: (chunk: Buffer, status: number) => void): Promise<number> {
  const url = new URL(baseUrl);
  const reader = new ChunkedBody(sink);
  readBuffer ??= Buffer.allocUnsafe(2 ** 20);
  const buffer = readBuffer;
  return new Promise((resolve, reject) => {
    let failed = false;
    const fail = (err: Error): void => {
      failed = true;
      socket.destroy();
      reject(err);
    };
    const socket = net.connect({
      host: url.hostname,
      port: Number(url.port),
      onread: {
        buffer,
        callback: (n: number, buf: Uint8Array): boolean => {
          try {
            reader.push(Buffer.from(buf.buffer, buf.byteOffset, n));
          } catch (err) {
            fail(err as Error);
          }
          return !failed;
        },
      },
    });
    socket.on("error", (err) => failed || fail(err));
    socket.on("close", () => {
      if (failed) return;
      try {
        reader.finish();
        resolve(reader.status);
      } catch (err) {
        reject(err as Error);
      }
    });
    const fields = { Host: url.host, ...req.headers, ...(req.body ? { "Content-Length": String(req.body.length) } : {}), Connection: "close" };
    const head = `${req.method} ${path} HTTP/1.1\r\n${Object.entries(fields)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("")}\r\n`;
    // Not end(): a half-closed request socket may be taken as the client leaving.
    socket.write(req.body ? Buffer.concat([Buffer.from(head, "latin1"), req.body]) : Buffer.from(head, "latin1"));
  });
}

/** GETs `url` over `socketRequest` and counts the body's bytes; rejects on a status other than 200. */
export async function socketCount(url: string): Promise<number> {
  const u = new URL(url);
  let n = 0;
  const status = await socketRequest(u.origin, u.pathname + u.search, { method: "GET" }, (chunk) => (n += chunk.length));
  if (status !== 200) throw new Error(`GET ${u.pathname} answered HTTP ${status}`);
  return n;
}

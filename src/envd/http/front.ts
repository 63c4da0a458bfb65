import net from "node:net";

/** The HTTP/2 client connection preface begins with these bytes ("PRI * HTTP/2.0"). */
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** Which protocol a connection speaks, judged from its first bytes. */
export type Sniffed = "h2" | "http1" | "undecided";

/** Classifies the first bytes of a connection: the HTTP/2 preface, anything else, or too short to tell. */
export function sniff(head: Buffer): Sniffed {
  const n = Math.min(head.length, H2_PREFACE.length);
  if (head.subarray(0, n).equals(H2_PREFACE.subarray(0, n))) return n === H2_PREFACE.length ? "h2" : "undecided";
  return "http1";
}

/** A connection that has not shown its protocol by then is closed, as headersTimeout does for HTTP/1.1. */
export const SNIFF_TIMEOUT_MS = 60_000;

/** Routes each accepted socket to the HTTP/1.1 or the HTTP/2 handler by its first bytes. */
export function createFront(onHttp1: (s: net.Socket) => void, onH2: (s: net.Socket) => void): net.Server {
  return net.createServer({ noDelay: true, pauseOnConnect: false }, (socket) => {
    let head: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = head.length ? Buffer.concat([head, chunk]) : chunk;
      const kind = sniff(head);
      if (kind === "undecided") return;
      socket.off("data", onData);
      socket.off("error", onEarlyError);
      socket.setTimeout(0);
      socket.off("timeout", onEarlyError);
      socket.pause();
      if (kind === "h2") {
        // The HTTP/2 session reads the native handle, and on its first tick feeds itself
        // whatever is already buffered on the socket, so the unshifted preface is not lost.
        socket.unshift(head);
        onH2(socket);
      } else {
        // The HTTP/1.1 server's native parser reads the handle from now on; the unshifted head
        // still reaches it first, as a 'data' event on resume (before any further read). Parsing
        // natively matters for uploads: parsing from 'data' events allocated every body byte
        // twice (socket chunk, then the parser's copy), doubling the external memory that makes
        // V8 run full mark-compacts while a large body streams in.
        socket.unshift(head);
        onHttp1(socket);
        socket.resume();
      }
    };
    const onEarlyError = () => socket.destroy();
    socket.on("error", onEarlyError);
    socket.setTimeout(SNIFF_TIMEOUT_MS, onEarlyError);
    socket.on("data", onData);
  });
}

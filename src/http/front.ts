import net from "node:net";
import { Duplex } from "node:stream";

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

/**
 * A Duplex over a socket that first replays bytes already read from it. An HTTP/2 session
 * reads from the socket's native handle, so bytes consumed in JavaScript cannot be unshifted
 * back for it; this relay hands them over instead.
 */
export class ReplaySocket extends Duplex {
  constructor(
    private readonly socket: net.Socket,
    head: Buffer,
  ) {
    super({ allowHalfOpen: false });
    this.push(head);
    socket.on("data", (chunk: Buffer) => {
      if (!this.push(chunk)) socket.pause();
    });
    socket.on("end", () => this.push(null));
    socket.on("error", (err) => this.destroy(err));
    socket.on("close", () => this.destroy());
  }

  get remoteAddress(): string | undefined {
    return this.socket.remoteAddress;
  }

  get remotePort(): number | undefined {
    return this.socket.remotePort;
  }

  get remoteFamily(): string | undefined {
    return this.socket.remoteFamily;
  }

  get localAddress(): string | undefined {
    return this.socket.localAddress;
  }

  get localPort(): number | undefined {
    return this.socket.localPort;
  }

  /** Lets callers bound idle time exactly as on a net.Socket. */
  setTimeout(ms: number, cb?: () => void): this {
    this.socket.setTimeout(ms, cb);
    return this;
  }

  setNoDelay(noDelay?: boolean): this {
    this.socket.setNoDelay(noDelay);
    return this;
  }

  setKeepAlive(enable?: boolean, delay?: number): this {
    this.socket.setKeepAlive(enable, delay);
    return this;
  }

  override _read(): void {
    this.socket.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.socket.write(chunk, cb);
  }

  override _writev(chunks: { chunk: Buffer }[], cb: (err?: Error | null) => void): void {
    this.socket.write(Buffer.concat(chunks.map((c) => c.chunk)), cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.socket.end(cb);
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.socket.destroy(err ?? undefined);
    cb(err);
  }
}

/** Routes each accepted socket to the HTTP/1.1 or the HTTP/2 handler by its first bytes. */
export function createFront(onHttp1: (s: net.Socket) => void, onH2: (s: Duplex) => void): net.Server {
  return net.createServer({ noDelay: true, pauseOnConnect: false }, (socket) => {
    let head: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = head.length ? Buffer.concat([head, chunk]) : chunk;
      const kind = sniff(head);
      if (kind === "undecided") return;
      socket.off("data", onData);
      socket.off("error", onEarlyError);
      socket.pause();
      if (kind === "h2") onH2(new ReplaySocket(socket, head));
      else {
        // Node's HTTP/1.1 server would read straight from the native handle and miss the
        // unshifted bytes; marking the handle consumed makes it parse from 'data' events.
        const handle = (socket as unknown as { _handle?: { _consumed?: boolean } })._handle;
        if (handle) handle._consumed = true;
        socket.unshift(head);
        onHttp1(socket);
        socket.resume();
      }
    };
    const onEarlyError = () => socket.destroy();
    socket.on("error", onEarlyError);
    socket.on("data", onData);
  });
}

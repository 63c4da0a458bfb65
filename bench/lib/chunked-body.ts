/**
 * A minimal HTTP/1.1 response reader for the bench's socket clients: the status line and
 * headers, then the body, chunked (`Transfer-Encoding: chunked`), sized (`Content-Length`) or
 * up to the connection's close. Body bytes go to `sink` as views of the pushed buffer, valid
 * only during the call. Strict: anything that is not HTTP/1.1 as a Node server writes it throws.
 */
export class ChunkedBody {
  status = 0;
  private state: "head" | "size" | "data" | "crlf" | "trailers" | "sized" | "close" | "done" = "head";
  /** Bytes of the head, a size line or the trailers, gathered across pushes. */
  private line = "";
  /** Bytes left in the current chunk, or of a sized body. */
  private left = 0;

  constructor(private readonly sink: (chunk: Buffer, status: number) => void) {}

  push(b: Buffer): void {
    let pos = 0;
    while (pos < b.length) {
      switch (this.state) {
        case "head":
        case "size":
        case "trailers": {
          const nl = b.indexOf(10, pos);
          const to = nl < 0 ? b.length : nl + 1;
          this.line += b.toString("latin1", pos, to);
          pos = to;
          if (this.line.length > 64 * 1024) throw new Error("HTTP head or chunk line too long");
          if (nl >= 0) this.endOfLine();
          break;
        }
        case "data":
        case "sized":
        case "close": {
          const n = this.state === "close" ? b.length - pos : Math.min(this.left, b.length - pos);
          this.sink(b.subarray(pos, pos + n), this.status);
          pos += n;
          this.left -= n;
          if (this.state === "data" && this.left === 0) this.state = "crlf";
          else if (this.state === "sized" && this.left === 0) this.state = "done";
          break;
        }
        case "crlf":
          this.line += String.fromCharCode(b[pos++]);
          if (this.line.length === 2) {
            if (this.line !== "\r\n") throw new Error("chunk not followed by CRLF");
            this.line = "";
            this.state = "size";
          }
          break;
        case "done":
          throw new Error("bytes after the end of the HTTP response");
      }
    }
  }

  /** Checks that the body ended where HTTP says it does (called at the connection's close). */
  finish(): void {
    if (this.state !== "done" && this.state !== "close") throw new Error(`HTTP response cut short (in ${this.state})`);
  }

  private endOfLine(): void {
    if (this.state === "size") {
      const size = /^([0-9a-fA-F]+)(;[^\r]*)?\r\n$/.exec(this.line);
      if (!size) throw new Error(`bad chunk size line ${JSON.stringify(this.line.slice(0, 40))}`);
      this.left = parseInt(size[1], 16);
      this.line = "";
      this.state = this.left === 0 ? "trailers" : "data";
      return;
    }
    if (this.state === "trailers") {
      if (this.line.endsWith("\r\n\r\n") || this.line === "\r\n") this.state = "done";
      return;
    }
    if (!this.line.endsWith("\r\n\r\n")) return;
    const [statusLine, ...fields] = this.line.slice(0, -4).split("\r\n");
    const status = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine + " ");
    if (!status) throw new Error(`bad HTTP status line ${JSON.stringify(statusLine.slice(0, 40))}`);
    this.status = Number(status[1]);
    const header = (name: string) =>
      fields
        .find((f) => f.toLowerCase().startsWith(`${name}:`))
        ?.slice(name.length + 1)
        .trim();
    this.line = "";
    const length = header("content-length");
    if (header("transfer-encoding")?.toLowerCase() === "chunked") this.state = "size";
    else if (length !== undefined) {
      this.left = Number(length);
      this.state = this.left === 0 ? "done" : "sized";
    } else this.state = "close";
  }
}

import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { HttpError } from "../http/errors.js";

/** Reads a small request body as UTF-8, refusing more than `limit` bytes with 413. */
export async function readBody(req: IncomingMessage | Http2ServerRequest, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new HttpError(413, `request body larger than ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

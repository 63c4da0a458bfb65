import { Invalid, PayloadTooLarge } from "../errors.js";
import type { AnyRequest, AnyResponse } from "../server/request.js";
import { errorAnswer } from "./errors.js";

/** Request bodies above this are refused with 413. */
export const MAX_BODY_BYTES = 1024 * 1024;

/** Sends a JSON answer with extra headers. */
export function sendJson(res: AnyResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(text)), "cache-control": "no-store" });
  res.end(text);
}

/** Sends an empty answer (204). */
export function sendEmpty(res: AnyResponse, status = 204): void {
  if (res.headersSent) return void res.destroy();
  res.writeHead(status, { "cache-control": "no-store" });
  res.end();
}

/** Sends an error as `{code, message[, error_code]}` with the status its kind maps to (a non-domain error as a bare 500). */
export function sendError(res: AnyResponse, err: unknown): void {
  const { status, body } = errorAnswer(err);
  sendJson(res, status, body);
}

/** Reads the whole body (at most 1 MiB) and parses it as JSON; an empty body is `undefined`. */
export function readJson(req: AnyRequest): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"] ?? "0");
    if (declared > MAX_BODY_BYTES) {
      req.resume();
      return reject(new PayloadTooLarge(`Request body too large: at most ${MAX_BODY_BYTES} bytes`));
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    req.on("data", (c: Buffer) => {
      if (done) return;
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        done = true;
        req.resume();
        return reject(new PayloadTooLarge(`Request body too large: at most ${MAX_BODY_BYTES} bytes`));
      }
      chunks.push(c);
    });
    req.on("error", (err) => {
      if (!done) reject(new Invalid(`Could not read the request body: ${err.message}`));
      done = true;
    });
    req.on("end", () => {
      if (done) return;
      done = true;
      const text = Buffer.concat(chunks).toString("utf8");
      if (text.trim() === "") return resolve(undefined);
      try {
        resolve(JSON.parse(text));
      } catch {
        reject(new Invalid("validation error: request body is not valid JSON"));
      }
    });
  });
}

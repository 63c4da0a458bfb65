import { constants } from "node:fs";
import { open, stat, type FileHandle } from "node:fs/promises";
import { basename } from "node:path";
import type { Deps } from "../deps.js";
import { HttpError } from "../http/errors.js";
import type { RouteRequest } from "../http/routes.js";
import { GZIP_READ_BUFFER, sendGzip } from "./adaptive-gzip.js";
import { typeByExtension } from "./content-type.js";
import { inlineDisposition } from "./disposition.js";
import { identityRejected, negotiateEncoding } from "./encoding.js";
import { authorizeFiles, headerValue, queryParam, resolvePath } from "./request.js";
import { serveIdentity } from "./serve.js";
import { sendBody } from "./send.js";

/** Request headers that force an identity response (ranges and validators need the raw bytes). */
const IDENTITY_ONLY = ["range", "if-modified-since", "if-none-match", "if-range"];

/** GET /files: streams a file to the client (envd-behaviour §4.5). */
export async function download(r: RouteRequest, deps: Deps): Promise<void> {
  const { user } = authorizeFiles(r, deps, "read");
  const raw = queryParam(r.query, "path") ?? "";
  const path = resolvePath(raw, user, deps, `error expanding and resolving path '${raw}': `);
  const st = await stat(path).catch((err: NodeJS.ErrnoException) => {
    // A path running through a regular file does not exist either (the reference says 500 there).
    if (err.code === "ENOENT" || err.code === "ENOTDIR") throw new HttpError(404, `path '${path}' does not exist`);
    throw new HttpError(500, `error checking if path exists '${path}': ${err.message}`, { cause: err });
  });
  if (st.isDirectory()) throw new HttpError(400, `path '${path}' is a directory`);
  if (!st.isFile()) throw notRegular(path);

  let coding = negotiateEncoding(headerValue(r, "accept-encoding"));
  r.res.setHeader("Vary", "Accept-Encoding");
  if (IDENTITY_ONLY.some((h) => headerValue(r, h))) {
    if (identityRejected(headerValue(r, "accept-encoding"))) {
      throw new HttpError(406, "identity encoding not acceptable for Range or conditional request");
    }
    coding = "identity";
  }

  let fh: FileHandle;
  try {
    // Never blocking: a FIFO swapped in since the stat would hold a pool thread until a writer came.
    fh = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw new HttpError(500, `error opening file '${path}': ${(err as Error).message}`, { cause: err });
  }
  try {
    const opened = await fh.stat();
    if (!opened.isFile()) throw notRegular(path);
    r.res.setHeader("Content-Disposition", inlineDisposition(basename(path)));
    if (coding === "gzip") await serveGzip(r, fh, raw);
    // The opened file's own length and times: an upload may have replaced the path since the stat above.
    else await serveIdentity(r, fh, opened, raw);
  } catch (err) {
    if (r.res.headersSent || r.res.destroyed) {
      // The client went away or the file failed mid-stream: nothing left to tell it.
      r.log.debug({ path, err: (err as Error).message }, "download ended early");
      r.res.destroy();
      return;
    }
    throw err;
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** A FIFO, socket or device: opening one can block a thread for good, and reading it may never end. */
function notRegular(path: string): HttpError {
  return new HttpError(400, `path '${path}' is not a regular file: only regular files can be downloaded (not FIFOs, sockets or devices)`);
}

/** Whole file through gzip: no length, no ranges; type from the raw path's extension only. */
async function serveGzip(r: RouteRequest, fh: FileHandle, raw: string): Promise<void> {
  r.res.setHeader("Content-Type", typeByExtension(raw) ?? "application/octet-stream");
  r.res.setHeader("Content-Encoding", "gzip");
  r.res.statusCode = 200;
  // The effort follows the data: text is deflated, incompressible bytes (and already-compressed
  // types, which are not even tried) go out as stored blocks read in place, one HTTP chunk per read.
  await sendBody(r.res, (out) => sendGzip(out, fh, isCompressed(raw) ? "store" : "judge"), GZIP_READ_BUFFER);
}

const COMPRESSED = /\.(gz|tgz|zip|zst|xz|bz2|lz4|7z|rar|br|jar|whl|png|jpe?g|gif|webp|avif|heic|mp[34]|m4a|mkv|webm|mov|ogg|opus|flac|woff2?|pdf|docx|xlsx|pptx|parquet)$/i;

/** Whether a path names a format that is compressed already. */
export function isCompressed(path: string): boolean {
  return COMPRESSED.test(path);
}

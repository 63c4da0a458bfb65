import type { BusboyFileStream, BusboyInstance } from "@fastify/busboy";
import { pipeline } from "node:stream";
import type { Readable } from "node:stream";
import { HttpError } from "../http/errors.js";
import type { RouteRequest } from "../http/routes.js";
import { bodyError } from "./body.js";
import { STREAM_CHUNK } from "./io.js";
import { storeUpload, type UploadTarget } from "./store.js";
import { writtenFile, type WrittenFile } from "./entry.js";
import { lazy } from "../platform/lazy.js";

const busboy = lazy<typeof import("@fastify/busboy")>("@fastify/busboy", () => require("@fastify/busboy"));

const FORM_ERROR = "error reading form: ";

/**
 * Writes every `file` part of a multipart body, one after another in part order. Without a
 * `path` query the part's filename is the whole target path (directories kept). Other parts
 * are skipped; a second part for an already written target stops the upload with a 400.
 */
export function uploadMultipart(
  r: RouteRequest,
  body: Readable,
  contentType: string,
  resolve: (raw: string) => string,
  rawPath: string | undefined,
  base: Omit<UploadTarget, "path">,
): Promise<WrittenFile[]> {
  let parser: BusboyInstance;
  try {
    parser = busboy().Busboy({
      // Any multipart subtype is read as form data, as the reference does.
      headers: { ...r.req.headers, "content-type": contentType.replace(/^\s*multipart\/[^;\s]*/i, "multipart/form-data") },
      preservePath: true,
      isPartAFile: () => true,
      fileHwm: STREAM_CHUNK,
    });
  } catch (err) {
    throw new HttpError(400, `error parsing multipart form: ${(err as Error).message}`, { cause: err });
  }

  return new Promise((settleOk, settleErr) => {
    const results: WrittenFile[] = [];
    const written: string[] = [];
    let failure: Error | undefined;
    let current: BusboyFileStream | undefined;
    let queue: Promise<void> = Promise.resolve();

    const settle = () => (failure ? settleErr(failure) : settleOk(results));
    const abort = (err: Error) => {
      if (failure) return;
      failure = err;
      current?.destroy(err);
      body.unpipe();
      body.destroy();
      void queue.then(settle);
    };

    const writePart = async (stream: BusboyFileStream, filename: string | undefined) => {
      current = stream;
      const raw = rawPath ?? filename;
      if (!raw) throw new HttpError(400, "error getting multipart custom part file name: the part has no filename");
      const path = resolve(raw);
      if (written.includes(path)) throw duplicate(path, written);
      await storeUpload({ ...base, path, sourceError: (e) => bodyError(e, FORM_ERROR) }, stream);
      written.push(path);
      results.push(await writtenFile(path));
      current = undefined;
    };

    parser.on("file", (field, stream, filename) => {
      stream.on("error", () => undefined); // surfaced through the write pipeline or abort
      if (field !== "file" || failure) {
        stream.resume();
        return;
      }
      queue = queue.then(async () => {
        if (failure) return void stream.resume();
        await writePart(stream, filename).catch((err: unknown) => abort(bodyError(err, FORM_ERROR)));
      });
    });
    parser.on("finish", () => void queue.then(settle));
    pipeline(body, parser, (err) => {
      if (err) abort(bodyError(err, FORM_ERROR));
    });
  });
}

/** The reference's message for a second part aimed at an already written path. */
function duplicate(path: string, written: string[]): HttpError {
  let message = `you cannot upload multiple files to the same path '${path}' in one upload request, only the first specified file was uploaded`;
  const others = written.filter((p) => p !== path);
  if (others.length > 1) message += `, also the following files were uploaded: ${others.join(", ")}`;
  return new HttpError(400, message);
}

import { pathlessSignatureAllows } from "../auth/signature.js";
import type { Deps } from "../deps.js";
import { HttpError } from "../http/errors.js";
import type { RouteRequest } from "../http/routes.js";
import { drainRequest, requestBody } from "./body.js";
import { requestCoding } from "./encoding.js";
import { metadataFromHeaders } from "./metadata.js";
import { uploadMultipart } from "./multipart.js";
import { authorizeFiles, headerValue, queryParam, resolvePath } from "./request.js";
import { storeUpload, type UploadTarget } from "./store.js";
import { writtenFile, type WrittenFile } from "./entry.js";
import type { UploadJournal } from "./journal.js";

/** POST /files: multipart or raw-body upload (envd-behaviour §4.6), answered with a JSON array. */
export async function upload(r: RouteRequest, deps: Deps, journal?: UploadJournal): Promise<void> {
  let files: WrittenFile[];
  try {
    files = await receive(r, deps, journal);
  } catch (err) {
    drainRequest(r.req);
    throw err;
  }
  const body = JSON.stringify(files);
  r.res.statusCode = 200;
  r.res.setHeader("Content-Type", "application/json");
  r.res.setHeader("Content-Length", Buffer.byteLength(body));
  r.res.end(body);
}

async function receive(r: RouteRequest, deps: Deps, journal: UploadJournal | undefined): Promise<WrittenFile[]> {
  const { user, signedBy } = authorizeFiles(r, deps, "write");
  const coding = requestCoding(headerValue(r, "content-encoding"));
  const metadata = metadataFromHeaders("headersDistinct" in r.req ? r.req.headersDistinct : r.req.headers);
  const contentType = headerValue(r, "content-type") ?? "";
  const media = contentType.split(";")[0].trim().toLowerCase();
  const rawPath = queryParam(r.query, "path");
  const length = Number(headerValue(r, "content-length"));
  const base: Omit<UploadTarget, "path"> = {
    user,
    metadata,
    contentLength: Number.isSafeInteger(length) && length > 0 ? length : undefined,
    log: r.log,
    journal,
  };

  if (media === "application/octet-stream") {
    if (!rawPath) throw new HttpError(400, "path query parameter is required for raw body upload");
    const path = resolvePath(rawPath, user, deps, "error resolving path: ");
    await storeUpload({ ...base, path }, requestBody(r.req, coding));
    return [await writtenFile(path)];
  }
  if (media.startsWith("multipart/")) {
    // A signature over no path covers only filenames inside the signed user's home.
    const confined = signedBy === "signature" && !rawPath;
    const resolve = (raw: string) => {
      const path = resolvePath(raw, user, deps, "error resolving path: ");
      if (confined && !pathlessSignatureAllows(path, user.home)) {
        throw new HttpError(403, `a write signature without a path only allows uploads into the home directory of user '${user.name}' (${user.home}): '${raw}' is outside it`);
      }
      return path;
    };
    return uploadMultipart(r, requestBody(r.req, coding), contentType, resolve, rawPath, base);
  }
  throw new HttpError(400, `unsupported content type: ${contentType}, expected multipart/form-data or application/octet-stream`);
}

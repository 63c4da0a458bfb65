import { randomUUID } from "node:crypto";
import { open, rename, stat, unlink, type FileHandle } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { queryUser } from "../auth/identity.js";
import { ensureDirs } from "../auth/paths.js";
import type { User } from "../auth/users.js";
import type { Deps } from "../deps.js";
import { HttpError } from "../http/errors.js";
import type { RouteRequest } from "../http/routes.js";
import { resolvePath } from "./request.js";
import { readChunks, STREAM_CHUNK, writeAll } from "./io.js";

/** Largest compose request body we read (it only lists paths). */
const MAX_BODY_BYTES = 1024 * 1024;

interface ComposeRequest {
  sources: string[];
  destination: string;
  username: string | null;
}

/**
 * POST /files/compose (envd-behaviour §4.7): concatenates source files into a temp file beside
 * the destination, renames it over the destination, then deletes the sources. On any failure
 * the temp file is removed and sources and destination are left as they were.
 */
export async function compose(r: RouteRequest, deps: Deps): Promise<void> {
  const req = parseRequest(await readBody(r));
  const user = queryUser(req.username, deps);
  const destination = resolvePath(req.destination, user, deps, "error resolving destination path: ");
  const sources = await checkSources(req.sources, destination, user, deps);
  try {
    await ensureDirs(dirname(destination), user.uid, user.gid);
  } catch (err) {
    throw new HttpError(500, `error ensuring directories: ${(err as Error).message}`, { cause: err });
  }
  await concatenate(sources, destination, user);
  await Promise.all(sources.map((s) => unlink(s).catch(() => undefined)));
  const body = JSON.stringify({ path: destination, name: basename(destination), type: "file" }) + "\n";
  r.res.statusCode = 200;
  r.res.setHeader("Content-Type", "application/json");
  r.res.setHeader("Content-Length", Buffer.byteLength(body));
  r.res.end(body);
}

/** Reads the JSON body; an oversized one is read to its end (so the answer arrives) but not kept. */
async function readBody(r: RouteRequest): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of r.req) {
    size += (chunk as Buffer).length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk as Buffer);
  }
  if (size > MAX_BODY_BYTES) throw new HttpError(400, `invalid request body: larger than ${MAX_BODY_BYTES} bytes`);
  return Buffer.concat(chunks).toString("utf8");
}

function parseRequest(text: string): ComposeRequest {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new HttpError(400, `invalid request body: ${(err as Error).message}`);
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new HttpError(400, "invalid request body: expected a JSON object");
  const { source_paths: sources, destination, username } = body as Record<string, unknown>;
  if (sources !== undefined && sources !== null && (!Array.isArray(sources) || sources.some((s) => typeof s !== "string"))) {
    throw new HttpError(400, "invalid request body: source_paths must be an array of strings");
  }
  if (destination !== undefined && destination !== null && typeof destination !== "string") throw new HttpError(400, "invalid request body: destination must be a string");
  if (username !== undefined && username !== null && typeof username !== "string") throw new HttpError(400, "invalid request body: username must be a string");
  if (!Array.isArray(sources) || sources.length === 0) throw new HttpError(400, "source_paths must not be empty");
  if (!destination) throw new HttpError(400, "destination is required");
  return { sources: sources as string[], destination, username: typeof username === "string" ? username : null };
}

async function checkSources(raw: string[], destination: string, user: User, deps: Deps): Promise<string[]> {
  const out: string[] = [];
  for (const src of raw) {
    const path = resolvePath(src, user, deps, `error resolving source path ${JSON.stringify(src)}: `);
    if (path === destination) throw new HttpError(400, `source path ${JSON.stringify(src)} cannot be the same as destination`);
    const st = await stat(path).catch((err) => {
      throw new HttpError(404, `source file not found: ${src}`, { cause: err });
    });
    if (!st.isFile()) throw new HttpError(400, `source path is not a regular file: ${src}`);
    out.push(path);
  }
  return out;
}

async function concatenate(sources: string[], destination: string, user: User): Promise<void> {
  const temp = `${destination}.e2b-compose.${randomUUID()}.tmp`;
  let fh: FileHandle;
  try {
    fh = await open(temp, "wx", 0o666);
  } catch (err) {
    throw failure(err, "error creating destination file");
  }
  let renamed = false;
  try {
    await fh.chown(user.uid, user.gid).catch((err) => {
      throw failure(err, "error changing file ownership");
    });
    // One read buffer for all sources: each chunk is written before the next read.
    const buf = Buffer.allocUnsafeSlow(STREAM_CHUNK);
    for (const src of sources) {
      const input = await open(src, "r").catch((err) => {
        throw failure(err, `error opening source file ${src}`);
      });
      try {
        for await (const chunk of readChunks(input, 0, Infinity, buf)) await writeAll(fh, chunk);
      } catch (err) {
        throw failure(err, `error composing source ${src}`);
      } finally {
        await input.close().catch(() => undefined);
      }
    }
    await fh.close().catch((err) => {
      throw failure(err, "error closing destination file");
    });
    await rename(temp, destination).catch((err) => {
      throw failure(err, "error finalizing compose");
    });
    renamed = true;
  } finally {
    await fh.close().catch(() => undefined);
    if (!renamed) await unlink(temp).catch(() => undefined);
  }
}

function failure(err: unknown, context: string): HttpError {
  if ((err as NodeJS.ErrnoException).code === "ENOSPC") return new HttpError(507, "not enough disk space available", { cause: err });
  return new HttpError(500, `${context}: ${(err as Error).message}`, { cause: err });
}

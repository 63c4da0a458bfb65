import { crypto } from "../platform/crypto.js";
import { constants, type Stats } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { queryUser } from "../auth/identity.js";
import type { User } from "../auth/users.js";
import type { Deps } from "../deps.js";
import { HttpError } from "../http/errors.js";
import type { RouteRequest } from "../http/routes.js";
import { resolvePath } from "./request.js";
import { readChunks, STREAM_CHUNK, writeAll } from "./io.js";
import { ensureParents, openAs, refusal, renameAs, statAs, unlinkAs } from "./user-fs.js";

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
 * the temp file is removed and sources and destination are left as they were. For a user other
 * than root, sources are opened, the temp file created and renamed and the sources deleted as
 * that user (user-fs.ts). A source that is the destination under another name is refused.
 */
export async function compose(r: RouteRequest, deps: Deps): Promise<void> {
  const req = parseRequest(await readBody(r));
  const user = queryUser(req.username, deps);
  const destination = resolvePath(req.destination, user, deps, "error resolving destination path: ");
  const sources: Source[] = [];
  try {
    for (const raw of req.sources) sources.push(await openSource(raw, destination, user, deps));
    await refuseSameFile(sources, destination, user);
    await ensureParents(user, dirname(destination)).catch((err: unknown) => {
      if (err instanceof HttpError) throw err;
      throw new HttpError(500, `error ensuring directories: ${(err as Error).message}`, { cause: err });
    });
    await concatenate(sources, destination, user);
  } finally {
    await Promise.all(sources.map((s) => s.fh.close().catch(() => undefined)));
  }
  await Promise.all(sources.map((s) => unlinkAs(user, s.path).catch(() => undefined)));
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

/** A source as requested, resolved, and opened for reading. */
interface Source {
  raw: string;
  path: string;
  fh: FileHandle;
  st: Stats;
}

/**
 * Resolves, checks and opens one source as the user. Its type is checked before the open (a FIFO
 * would block a thread) and again on the opened file (it may have been swapped meanwhile).
 */
async function openSource(raw: string, destination: string, user: User, deps: Deps): Promise<Source> {
  const path = resolvePath(raw, user, deps, `error resolving source path ${JSON.stringify(raw)}: `);
  if (path === destination) throw new HttpError(400, `source path ${JSON.stringify(raw)} cannot be the same as destination`);
  const before = await statAs(user, path).catch((err) => {
    throw refusal(err, user, `error opening source file ${raw}`) ?? new HttpError(404, `source file not found: ${raw}`, { cause: err });
  });
  if (!before) throw new HttpError(404, `source file not found: ${raw}`);
  if (!before.isFile()) throw new HttpError(400, `source path is not a regular file: ${raw}`);
  const fh = await openAs(user, path, constants.O_RDONLY | constants.O_NONBLOCK).catch((err) => {
    throw failure(err, `error opening source file ${path}`, user);
  });
  const st = await fh.stat().catch(() => undefined);
  if (!st?.isFile()) {
    await fh.close().catch(() => undefined);
    throw new HttpError(400, `source path is not a regular file: ${raw}`);
  }
  return { raw, path, fh, st };
}

/** Compose replaces the destination and then deletes the sources: one of them being the destination would lose it. */
async function refuseSameFile(sources: Source[], destination: string, user: User): Promise<void> {
  const dest = await statAs(user, destination).catch(() => undefined);
  if (!dest) return;
  for (const s of sources) {
    if (s.st.dev === dest.dev && s.st.ino === dest.ino) {
      throw new HttpError(400, `source path ${JSON.stringify(s.raw)} cannot be the same as destination: it is the destination file under another name`);
    }
  }
}

async function concatenate(sources: Source[], destination: string, user: User): Promise<void> {
  const temp = `${destination}.e2b-compose.${crypto().randomUUID()}.tmp`;
  let fh: FileHandle;
  try {
    fh = await openAs(user, temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_TRUNC);
  } catch (err) {
    throw failure(err, "error creating destination file", user);
  }
  let renamed = false;
  try {
    await fh.chown(user.uid, user.gid).catch((err) => {
      throw failure(err, "error changing file ownership", user);
    });
    // One read buffer for all sources: each chunk is written before the next read.
    const buf = Buffer.allocUnsafeSlow(STREAM_CHUNK);
    for (const src of sources) {
      try {
        for await (const chunk of readChunks(src.fh, 0, Infinity, buf)) await writeAll(fh, chunk);
      } catch (err) {
        throw failure(err, `error composing source ${src.path}`, user);
      }
    }
    await fh.close().catch((err) => {
      throw failure(err, "error closing destination file", user);
    });
    await renameAs(user, temp, destination).catch((err) => {
      throw failure(err, "error finalizing compose", user);
    });
    renamed = true;
  } finally {
    await fh.close().catch(() => undefined);
    if (!renamed) await unlinkAs(user, temp).catch(() => undefined);
  }
}

function failure(err: unknown, context: string, user: User): HttpError {
  if (err instanceof HttpError) return err;
  const denied = refusal(err, user, context);
  if (denied) return denied;
  if ((err as NodeJS.ErrnoException).code === "ENOSPC") return new HttpError(507, "not enough disk space available", { cause: err });
  return new HttpError(500, `${context}: ${(err as Error).message}`, { cause: err });
}

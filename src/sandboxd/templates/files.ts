import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { createWriteStream, existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { extract } from "tar";
import type { AnyRequest } from "../proxy/errors.js";
import { ApiError } from "../sandboxes/errors.js";
import { MAPPED_ROOT } from "../runtime/idmap.js";
import { shiftOwnership } from "../images/shift.js";

/** The largest upload of COPY sources. */
export const MAX_UPLOAD_BYTES = 1024 * 1024 * 1024;
/** How long an upload URL is valid. */
const URL_TTL_MS = 3600_000;

/**
 * The COPY sources the SDK uploads: one tar(.gz) per team and files hash, received through an
 * upload URL sandboxd signs and serves itself, unpacked once per hash for the build sandboxes.
 */
export class TemplateFiles {
  constructor(
    private readonly dir: string,
    private readonly secret: () => string,
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o711 });
  }

  private tar(teamID: string, hash: string): string {
    return join(this.dir, teamID, `${hash}.tar`);
  }

  has(teamID: string, hash: string): boolean {
    return existsSync(this.tar(teamID, hash));
  }

  private sign(text: string): string {
    return createHmac("sha256", this.secret()).update(`template-files:${text}`).digest("base64url");
  }

  /** A token for the upload URL of one team's files hash, valid for an hour. */
  uploadToken(teamID: string, hash: string): string {
    const exp = String(Date.now() + URL_TTL_MS);
    return `${teamID}.${exp}.${this.sign(`${teamID}.${hash}.${exp}`)}`;
  }

  /** The team a valid, unexpired upload token for `hash` is for; 403 otherwise. */
  checkToken(token: string, hash: string): string {
    const [teamID, exp, sig] = token.split(".");
    const want = teamID && exp ? Buffer.from(this.sign(`${teamID}.${hash}.${exp}`)) : Buffer.alloc(0);
    const got = Buffer.from(sig ?? "");
    if (want.length === 0 || got.length !== want.length || !timingSafeEqual(got, want)) throw new ApiError(403, "invalid upload token");
    if (Number(exp) < Date.now()) throw new ApiError(403, "the upload URL has expired; ask for a new one");
    return teamID;
  }

  /** Receives one upload (Content-Length required, at most 1 GiB); a short body keeps nothing. */
  async receive(req: AnyRequest, teamID: string, hash: string): Promise<void> {
    const declared = req.headers["content-length"];
    if (declared === undefined) throw new ApiError(411, "an upload needs a Content-Length");
    const size = Number(declared);
    if (!Number.isInteger(size) || size < 0) throw new ApiError(400, "invalid Content-Length");
    if (size > MAX_UPLOAD_BYTES) throw new ApiError(413, `the upload is larger than ${MAX_UPLOAD_BYTES} bytes`);
    mkdirSync(join(this.dir, teamID), { recursive: true, mode: 0o711 });
    const tmp = `${this.tar(teamID, hash)}.tmp-${randomBytes(4).toString("hex")}`;
    let got = 0;
    req.on("data", (c: Buffer) => (got += c.length));
    try {
      await pipeline(req, createWriteStream(tmp, { mode: 0o600 }));
      if (got !== size) throw new ApiError(400, `the upload was cut short: ${got} of ${size} bytes`);
      renameSync(tmp, this.tar(teamID, hash));
    } catch (err) {
      rmSync(tmp, { force: true });
      if (err instanceof ApiError) throw err;
      throw new ApiError(400, `the upload failed: ${(err as Error).message}`);
    }
  }

  /** The unpacked files of a hash (unpacked on first use, belonging to the sandboxes' root), or undefined. */
  async unpacked(teamID: string, hash: string): Promise<string | undefined> {
    const tar = this.tar(teamID, hash);
    if (!existsSync(tar)) return undefined;
    const out = join(this.dir, teamID, `${hash}.d`);
    if (existsSync(out)) return out;
    const tmp = `${out}.tmp-${randomBytes(4).toString("hex")}`;
    mkdirSync(tmp, { mode: 0o755 });
    try {
      // node-tar refuses absolute and '..' paths and writing through symlinks it made
      await extract({ file: tar, cwd: tmp, strict: true, preserveOwner: false });
      shiftOwnership(tmp, MAPPED_ROOT);
      renameSync(tmp, out);
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      throw new Error(`the uploaded files are not a valid tar archive (${(err as Error).message})`);
    }
    return out;
  }
}

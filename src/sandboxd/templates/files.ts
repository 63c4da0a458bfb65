import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { createWriteStream, existsSync, lstatSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, utimesSync } from "node:fs";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { DomainError, Forbidden, Invalid, LengthRequired, PayloadTooLarge } from "../errors.js";
import { MAPPED_ROOT } from "../host/idmap.js";
import { shiftOwnership } from "../images/shift.js";
import { ExtractError, removeExtracted, safeExtract } from "./extract.js";
import { DEFAULT_UPLOAD_LIMITS, type UploadLimits } from "./limits.js";

/** How long an upload URL is valid. */
const URL_TTL_MS = 3600_000;

/** One stored upload: `<hash>.<digest>.tar` and, once used, `<hash>.<digest>.d`. */
interface Stored {
  hash: string;
  digest: string;
  tar: string;
  dir: string;
  mtimeMs: number;
  bytes: number;
}

/** The unpacked files of one upload, held for a build step until `release()`. */
export interface HeldFiles {
  dir: string;
  /** The SHA-256 of the stored archive (part of the layer cache key: a layer is of these bytes). */
  digest: string;
  release(): void;
}

/** Bytes a directory tree takes (file sizes), not following links. */
function treeBytes(dir: string): number {
  let n = 0;
  const visit = (p: string) => {
    const st = lstatSync(p, { throwIfNoEntry: false });
    if (!st) return;
    n += st.isFile() ? st.size : 0;
    if (st.isDirectory()) for (const c of readdirSync(p)) visit(join(p, c));
  };
  visit(dir);
  return n;
}

/**
 * The COPY sources the SDK uploads, per team: each team has its own directory, so no team can
 * see, replace or be served another's files. An upload is stored under its files hash and the
 * SHA-256 of its bytes, received through an upload URL sandboxd signs, and unpacked (bounded,
 * see safeExtract) on first use. A team keeps at most `teamMaxUploads` uploads and
 * `teamMaxBytes` (archives and unpacked files); past that its least recently used uploads that
 * no build holds are evicted, and when that is not enough the upload is refused.
 */
export class TemplateFiles {
  private readonly held = new Map<string, number>();
  private readonly sizes = new Map<string, number>();
  /** Bytes of uploads being received, per team (counted against the quota until stored). */
  private readonly pending = new Map<string, { bytes: number; count: number }>();

  constructor(
    private readonly dir: string,
    private readonly secret: () => string,
    readonly limits: UploadLimits = DEFAULT_UPLOAD_LIMITS,
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o711 });
  }

  private teamDir(teamID: string): string {
    if (!/^[A-Za-z0-9_-]{1,128}$/.test(teamID)) throw new Invalid("invalid team");
    return join(this.dir, teamID);
  }

  /** The team's stored uploads (complete ones only), oldest use first. */
  private stored(teamID: string): Stored[] {
    const d = this.teamDir(teamID);
    if (!existsSync(d)) return [];
    const out: Stored[] = [];
    for (const name of readdirSync(d)) {
      const m = /^([A-Za-z0-9_-]{1,128})\.([0-9a-f]{64})\.tar$/.exec(name);
      if (!m) continue;
      const tar = join(d, name);
      const st = statSync(tar, { throwIfNoEntry: false });
      if (!st) continue;
      const dir = join(d, `${m[1]}.${m[2]}.d`);
      let unpacked = this.sizes.get(dir);
      if (unpacked === undefined && existsSync(dir)) this.sizes.set(dir, (unpacked = treeBytes(dir)));
      out.push({ hash: m[1], digest: m[2], tar, dir, mtimeMs: st.mtimeMs, bytes: st.size + (unpacked ?? 0) });
    }
    return out.sort((a, b) => a.mtimeMs - b.mtimeMs);
  }

  private find(teamID: string, hash: string): Stored | undefined {
    return this.stored(teamID).filter((s) => s.hash === hash).pop();
  }

  private usage(teamID: string): { bytes: number; count: number } {
    const all = this.stored(teamID);
    const p = this.pending.get(teamID) ?? { bytes: 0, count: 0 };
    return { bytes: all.reduce((n, s) => n + s.bytes, 0) + p.bytes, count: all.length + p.count };
  }

  private isHeld(s: Stored): boolean {
    return (this.held.get(s.dir) ?? 0) > 0;
  }

  private drop(s: Stored): void {
    rmSync(s.tar, { force: true });
    removeExtracted(s.dir);
    this.sizes.delete(s.dir);
  }

  /**
   * Evicts the team's least recently used uploads no build holds until `bytes` more and one
   * more upload fit; Invalid naming the limit when they cannot.
   */
  private makeRoom(teamID: string, bytes: number): void {
    const { teamMaxUploads, teamMaxBytes } = this.limits;
    if (bytes > teamMaxBytes) throw new Invalid(`the upload (${bytes} bytes) is larger than the team's storage for template files (${teamMaxBytes} bytes)`);
    for (const s of this.stored(teamID)) {
      const u = this.usage(teamID);
      if (u.count + 1 <= teamMaxUploads && u.bytes + bytes <= teamMaxBytes) return;
      if (!this.isHeld(s)) this.drop(s);
    }
    const u = this.usage(teamID);
    if (u.count + 1 > teamMaxUploads) throw new Invalid(`the team keeps ${u.count} uploads of template files, the most it may (${teamMaxUploads}), and builds in progress hold them; retry when they finish`);
    if (u.bytes + bytes > teamMaxBytes) throw new Invalid(`the team's template files take ${u.bytes} bytes; ${bytes} more would pass its quota of ${teamMaxBytes} bytes while builds in progress hold them; retry when they finish`);
  }

  /** Whether the team has files stored under `hash`. */
  has(teamID: string, hash: string): boolean {
    return this.find(teamID, hash) !== undefined;
  }

  /** Checks an upload link can be used: room for one more upload (evicting unused ones); Invalid otherwise. */
  checkRoom(teamID: string): void {
    this.makeRoom(teamID, 0);
  }

  private sign(text: string): string {
    return createHmac("sha256", this.secret()).update(`template-files:${text}`).digest("base64url");
  }

  /** A token for the upload URL of one team's files hash, valid for an hour. */
  uploadToken(teamID: string, hash: string): string {
    const exp = String(Date.now() + URL_TTL_MS);
    return `${teamID}.${exp}.${this.sign(`${teamID}.${hash}.${exp}`)}`;
  }

  /** The team a valid, unexpired upload token for `hash` is for; Forbidden otherwise. */
  checkToken(token: string, hash: string): string {
    const [teamID, exp, sig] = token.split(".");
    const want = teamID && exp ? Buffer.from(this.sign(`${teamID}.${hash}.${exp}`)) : Buffer.alloc(0);
    const got = Buffer.from(sig ?? "");
    if (want.length === 0 || got.length !== want.length || !timingSafeEqual(got, want)) throw new Forbidden("invalid upload token");
    if (Number(exp) < Date.now()) throw new Forbidden("the upload URL has expired; ask for a new one");
    return teamID;
  }

  /**
   * Receives one upload body (its declared Content-Length required, at most `maxUploadBytes`, within the team's
   * quota); a short or long body keeps nothing. A new upload under a hash replaces the old one
   * (unless a build holds it: then both stay until the next eviction).
   */
  async receive(body: Readable, declared: string | undefined, teamID: string, hash: string): Promise<void> {
    if (declared === undefined) throw new LengthRequired("an upload needs a Content-Length");
    const size = Number(declared);
    if (!Number.isSafeInteger(size) || size < 0) throw new Invalid("invalid Content-Length");
    const max = this.limits.maxUploadBytes;
    if (size > max) throw new PayloadTooLarge(`the upload is larger than ${max} bytes`);
    const d = this.teamDir(teamID);
    mkdirSync(d, { recursive: true, mode: 0o711 });
    this.makeRoom(teamID, size);
    const p = this.pending.get(teamID) ?? { bytes: 0, count: 0 };
    p.bytes += size;
    p.count++;
    this.pending.set(teamID, p);
    const tmp = join(d, `${hash}.tmp-${randomBytes(4).toString("hex")}`);
    const sha = createHash("sha256");
    let got = 0;
    body.on("data", (c: Buffer) => {
      got += c.length;
      sha.update(c);
      // more than declared: stop storing at once (the body is not what the length promised)
      if (got > size) body.destroy(new Error(`the body is longer than its Content-Length (${size})`));
    });
    try {
      await pipeline(body, createWriteStream(tmp, { mode: 0o600 }));
      if (got !== size) throw new Invalid(`the upload was cut short: ${got} of ${size} bytes`);
      const digest = sha.digest("hex");
      const old = this.stored(teamID).filter((s) => s.hash === hash && s.digest !== digest && !this.isHeld(s));
      renameSync(tmp, join(d, `${hash}.${digest}.tar`));
      for (const s of old) this.drop(s);
    } catch (err) {
      rmSync(tmp, { force: true });
      if (err instanceof DomainError) throw err;
      throw new Invalid(`the upload failed: ${(err as Error).message}`);
    } finally {
      p.bytes -= size;
      p.count--;
    }
  }

  /** The digest of the team's files under `hash` (the newest upload), or undefined when none. */
  digest(teamID: string, hash: string): string | undefined {
    return this.find(teamID, hash)?.digest;
  }

  /**
   * The unpacked files of the team's upload with `digest`, held (never evicted) until released;
   * undefined when it is not stored. Unpacks on first use, within the extraction limits and what
   * is left of the team's quota; an archive over them is refused with a message saying why, and
   * leaves nothing behind.
   */
  async hold(teamID: string, hash: string, digest: string): Promise<HeldFiles | undefined> {
    const s = this.stored(teamID).find((x) => x.hash === hash && x.digest === digest);
    if (!s) return undefined;
    this.held.set(s.dir, (this.held.get(s.dir) ?? 0) + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const n = (this.held.get(s.dir) ?? 1) - 1;
      if (n > 0) this.held.set(s.dir, n);
      else this.held.delete(s.dir);
    };
    try {
      const now = new Date();
      utimesSync(s.tar, now, now); // most recently used: evicted last
      if (!existsSync(s.dir)) {
        const left = this.limits.teamMaxBytes - this.usage(teamID).bytes;
        const limits = { ...this.limits.extract, maxBytes: Math.max(0, Math.min(this.limits.extract.maxBytes, left)) };
        const tmp = `${s.dir}.tmp-${randomBytes(4).toString("hex")}`;
        mkdirSync(tmp, { mode: 0o755 });
        try {
          const r = await safeExtract(s.tar, tmp, limits);
          shiftOwnership(tmp, MAPPED_ROOT);
          if (existsSync(s.dir)) removeExtracted(tmp); // another build unpacked the same upload meanwhile
          else renameSync(tmp, s.dir);
          this.sizes.set(s.dir, r.bytes);
        } catch (err) {
          removeExtracted(tmp);
          if (err instanceof ExtractError && err.format) throw new Error(`the uploaded files are not a valid tar archive (${err.message})`);
          if (err instanceof ExtractError) {
            const quota = limits.maxBytes < this.limits.extract.maxBytes ? ` (what is left of the team's ${this.limits.teamMaxBytes}-byte quota for template files)` : "";
            throw new Error(`the uploaded files were refused: ${err.message}${quota}`);
          }
          throw new Error(`unpacking the uploaded files failed: ${(err as Error).message}`);
        }
      }
      return { dir: s.dir, digest: s.digest, release };
    } catch (err) {
      release();
      throw err;
    }
  }

  /**
   * Start-up: removes what a stopped sandboxd left half-made (uploads being received, archives
   * being unpacked) and the unversioned files an older sandboxd stored (the SDK re-uploads them).
   */
  sweep(): void {
    for (const team of readdirSync(this.dir)) {
      const d = join(this.dir, team);
      if (!lstatSync(d).isDirectory()) continue;
      for (const name of readdirSync(d)) {
        if (name.includes(".tmp-") || /^[A-Za-z0-9_-]+\.(tar|d)$/.test(name)) rmSync(join(d, name), { recursive: true, force: true });
      }
    }
  }
}

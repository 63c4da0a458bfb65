// The access token's hash kept in the run dir, so that a restarted envd stays closed until /init.
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, chmodSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { isTokenHash } from "../config.js";

/** What a previous run of the daemon left: no token, the SHA-512 of its token, or nothing readable. */
export type PriorToken = { kind: "none" } | { kind: "hash"; hash: string } | { kind: "unknown"; reason: string };

const FILE = "access-token.sha512";

/**
 * Keeps the SHA-512 of the current access token (never the token) in a root-only directory of
 * the run dir (tmpfs: gone on reboot, kept across a restart of the daemon), so that a restarted
 * daemon knows a token was set and stays closed until /init presents it again. Everything is
 * checked before it is trusted: the directory and the file must be ours, not links, and
 * private (0700, 0600); anything else reads as "unknown", which keeps the daemon closed.
 */
export class TokenHashStore {
  readonly file: string;

  constructor(readonly dir: string) {
    this.file = join(dir, FILE);
  }

  /** Prepares the directory and reads what the previous run left (at start, before listening). */
  load(): PriorToken {
    try {
      this.ensureDir();
    } catch (err) {
      return { kind: "unknown", reason: `state directory unusable (${codeOf(err)})` };
    }
    let fd: number;
    try {
      fd = openSync(this.file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return { kind: "none" };
      return { kind: "unknown", reason: `state file unreadable (${codeOf(err)})` };
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile() || st.uid !== uid() || (st.mode & 0o077) !== 0) return { kind: "unknown", reason: "state file not private to envd" };
      const text = readFileSync(fd, "utf8").trim();
      return isTokenHash(text) ? { kind: "hash", hash: text } : { kind: "unknown", reason: "state file malformed" };
    } catch (err) {
      return { kind: "unknown", reason: `state file unreadable (${codeOf(err)})` };
    } finally {
      closeSync(fd);
    }
  }

  /**
   * Records the hash of the token now set, or that none is (undefined); rejects when it cannot.
   * Synchronous underneath: a 129-byte file in the run dir (tmpfs), once per /init, where an
   * asynchronous write would start libuv's thread pool (see hosts.ts).
   */
  async save(hash: string | undefined): Promise<void> {
    this.ensureDir();
    if (hash === undefined) {
      try {
        unlinkSync(this.file);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      }
      return;
    }
    const tmp = `${this.file}.${process.pid}.tmp`;
    try {
      unlinkSync(tmp);
    } catch {
      // not there
    }
    const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      const line = Buffer.from(hash + "\n");
      for (let off = 0; off < line.length; ) off += writeSync(fd, line, off);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.file);
  }

  /** Creates the directory 0700 when missing; refuses one that is a link or not ours. */
  private ensureDir(): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const st = lstatSync(this.dir);
    if (!st.isDirectory() || st.uid !== uid()) throw Object.assign(new Error("not a directory owned by envd"), { code: "EPERM" });
    if ((st.mode & 0o077) !== 0) chmodSync(this.dir, 0o700);
  }
}

function uid(): number {
  return process.getuid?.() ?? 0;
}

function codeOf(err: unknown): string {
  return (err as NodeJS.ErrnoException)?.code ?? "error";
}

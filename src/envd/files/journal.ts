import { mkdirSync, readdirSync } from "node:fs";
import { lstat, readFile, rename, unlink, writeFile } from "node:fs/promises";
import { crypto } from "../platform/crypto.js";
import { join } from "node:path";
import type { Logger } from "../http/log.js";

/** What an in-flight upload may leave behind if the daemon dies mid-way. */
export interface InFlight {
  /**
   * A target this upload created (new file): partial until the upload completes. Journaled
   * before the file exists; the inode is added once known, before any byte is written.
   */
  created?: { path: string; ino?: number };
  /** A temp file beside the target (replacement of an existing file). */
  temp?: string;
}

/**
 * Records in-flight uploads in the run dir (a tmpfs) so that after a crash (SIGKILL, OOM kill)
 * the next start removes what they left: a partially written new file at its target path, or
 * a temp file beside a target. Entries of a clean finish are removed at once.
 */
export class UploadJournal {
  private readonly stale: string[];
  private dir: string | undefined;
  private readonly bornAt = Date.now();

  constructor(dir: string) {
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      this.dir = dir;
      this.stale = readdirSync(dir).filter((n) => n.endsWith(".json") || n.endsWith(".next"));
    } catch {
      this.dir = undefined; // no run dir: uploads still work, only crash cleanup is lost
      this.stale = [];
    }
  }

  /** Removes what uploads of a previous run left; resolves with how many items were removed. */
  async sweep(log: Logger): Promise<number> {
    let removed = 0;
    for (const name of this.stale) {
      const file = join(this.dir!, name);
      if (name.endsWith(".next")) {
        await unlink(file).catch(() => undefined); // an update cut short; its entry still stands
        continue;
      }
      try {
        const entry = JSON.parse(await readFile(file, "utf8")) as InFlight;
        if (entry.temp && (await unlink(entry.temp).then(() => true, () => false))) removed++;
        if (entry.created) {
          const st = await lstat(entry.created.path).catch(() => undefined);
          // Only the very file the dead upload created: a newer file at that path is left alone.
          // Without an inode it died before writing a byte: only an empty file from before this
          // start can be its.
          const ours = entry.created.ino === undefined ? st?.isFile() && st.size === 0 && st.mtimeMs < this.bornAt : st?.ino === entry.created.ino;
          if (st && ours && (await unlink(entry.created.path).then(() => true, () => false))) removed++;
        }
      } catch (err) {
        log.warn({ err: String(err) }, "unreadable upload journal entry");
      }
      await unlink(file).catch(() => undefined);
    }
    if (removed) log.info({ removed }, "removed partial uploads left by a previous run");
    return removed;
  }

  /** Records an in-flight upload; returns the handle to pass to end(). */
  async begin(entry: InFlight): Promise<string | undefined> {
    if (!this.dir) return undefined;
    const file = join(this.dir, `${crypto().randomBytes(8).toString("hex")}.json`);
    await writeFile(file, JSON.stringify(entry), { mode: 0o600 }).catch(() => undefined);
    return file;
  }

  /** Replaces an in-flight entry (atomically: a crash leaves the old or the new one). */
  async update(handle: string | undefined, entry: InFlight): Promise<void> {
    if (!handle) return;
    const next = `${handle.slice(0, -".json".length)}.next`;
    await writeFile(next, JSON.stringify(entry), { mode: 0o600 })
      .then(() => rename(next, handle))
      .catch(() => undefined);
  }

  /** Forgets an upload that finished (or failed and cleaned up after itself). */
  async end(handle: string | undefined): Promise<void> {
    if (handle) await unlink(handle).catch(() => undefined);
  }
}

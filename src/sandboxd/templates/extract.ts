import { closeSync, constants, createReadStream, createWriteStream, fchmodSync, linkSync, lstatSync, mkdirSync, chmodSync, openSync, rmSync, symlinkSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { Parser, type ReadEntry } from "tar";

/** How much one uploaded archive may unpack to. */
export interface ExtractLimits {
  /** Sum of the regular files' sizes. */
  maxBytes: number;
  /** Entries of any kind (each costs an inode). */
  maxEntries: number;
  /** Path components of one entry. */
  maxDepth: number;
}

/** An archive refused for what it holds (the message says what, fit for a build's reason); `format`: not a readable tar at all. */
export class ExtractError extends Error {
  constructor(message: string, readonly format = false) {
    super(message);
  }
}

/** The most a compressed archive may inflate (node-tar's default: 1000, near deflate's own maximum). */
const RATIO = 1000;

const FILE_TYPES = new Set(["File", "OldFile", "ContiguousFile"]);

/**
 * An entry's archive path as components: absolute paths and `..` are refused (the SDK makes
 * neither), `.` and empty components dropped.
 */
function components(raw: string, what: string): string[] {
  if (raw.startsWith("/")) throw new ExtractError(`${what} ${JSON.stringify(raw.slice(0, 200))} is absolute`);
  const parts = raw.split("/").filter((c) => c !== "" && c !== ".");
  if (parts.includes("..")) throw new ExtractError(`${what} ${JSON.stringify(raw.slice(0, 200))} contains '..'`);
  if (parts.some((c) => c.includes("\0"))) throw new ExtractError(`${what} contains a NUL byte`);
  return parts;
}

/**
 * Unpacks a tar (plain, gzip or zstd, as node-tar's parser detects) into `out`, a fresh directory
 * only this call writes to, within `limits`. Regular files, directories, symlinks and hard links
 * only (device nodes, FIFOs and sparse files are refused); symlinks are kept verbatim whatever
 * their target (absolute targets are legal: they resolve inside the sandbox) and never followed:
 * every parent of an entry must be a real directory made by this archive, so a symlink entry
 * cannot redirect a later entry out of `out`; hard links point only at files already in `out`.
 * Because nothing else writes below `out` while this runs, lstat checks are race-free here.
 * The caller removes `out` on failure.
 */
export async function safeExtract(file: string, out: string, limits: ExtractLimits): Promise<{ bytes: number; entries: number }> {
  let bytes = 0;
  let entries = 0;
  let failed: Error | undefined;
  const writes: Promise<void>[] = [];
  const open = new Set<NodeJS.WritableStream & { destroy(): void }>();
  const src = createReadStream(file);
  const parser = new Parser({ strict: true, maxMetaEntrySize: 1024 * 1024, maxDecompressionRatio: RATIO });

  /** Makes (or checks) each parent directory of `parts`, refusing anything that is not a real directory. */
  const parents = (parts: string[], raw: string) => {
    let p = out;
    for (const c of parts.slice(0, -1)) {
      p = join(p, c);
      const st = lstatSync(p, { throwIfNoEntry: false });
      if (!st) mkdirSync(p, { mode: 0o755 });
      else if (!st.isDirectory()) throw new ExtractError(`entry ${JSON.stringify(raw.slice(0, 200))} goes through ${st.isSymbolicLink() ? "a symlink" : "a non-directory"} (${c})`);
    }
    return join(out, ...parts);
  };
  /** Removes what an earlier entry put at `p` (archives may repeat a path: the later one wins); a directory stays only for a directory. */
  const clear = (p: string, forDir: boolean) => {
    const st = lstatSync(p, { throwIfNoEntry: false });
    if (!st) return;
    if (st.isDirectory()) {
      if (!forDir) throw new ExtractError(`an entry replaces the directory ${JSON.stringify(p.slice(out.length + 1).slice(0, 200))} with a non-directory`);
      return;
    }
    unlinkSync(p);
  };

  const onEntry = (entry: ReadEntry) => {
    try {
      if (failed) throw failed;
      entries++;
      if (entries > limits.maxEntries) throw new ExtractError(`the archive has more than ${limits.maxEntries} entries`);
      const raw = entry.path;
      const parts = components(raw, "path");
      if (parts.length === 0) {
        entry.resume(); // the archive's root itself
        return;
      }
      if (parts.length > limits.maxDepth) throw new ExtractError(`path ${JSON.stringify(raw.slice(0, 200))} is deeper than ${limits.maxDepth} components`);
      const mode = (entry.mode ?? 0o644) & 0o7777;
      const p = parents(parts, raw);
      if (entry.type === "Directory") {
        clear(p, true);
        if (!lstatSync(p, { throwIfNoEntry: false })) mkdirSync(p, { mode: 0o755 });
        chmodSync(p, mode); // lstat above: a real directory of ours (root writes into it whatever its mode)
        entry.resume();
      } else if (FILE_TYPES.has(entry.type)) {
        bytes += entry.size;
        if (bytes > limits.maxBytes) throw new ExtractError(`the files unpack to more than ${limits.maxBytes} bytes`);
        clear(p, false);
        const fd = openSync(p, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
        try {
          fchmodSync(fd, mode);
        } catch (err) {
          closeSync(fd);
          throw err;
        }
        const ws = createWriteStream("", { fd });
        open.add(ws);
        writes.push(
          new Promise<void>((resolve) => {
            ws.on("close", () => {
              open.delete(ws);
              resolve();
            });
            ws.on("error", (err) => {
              fail(err);
              resolve();
            });
            entry.on("error", (err: unknown) => {
              fail(err as Error);
              ws.destroy();
            });
          }),
        );
        entry.pipe(ws);
      } else if (entry.type === "SymbolicLink") {
        const target = entry.linkpath ?? "";
        if (target === "" || target.includes("\0")) throw new ExtractError(`symlink ${JSON.stringify(raw.slice(0, 200))} has no valid target`);
        clear(p, false);
        symlinkSync(target, p);
        entry.resume();
      } else if (entry.type === "Link") {
        const tparts = components(entry.linkpath ?? "", "hard link target");
        const target = join(out, ...tparts);
        // the target's parents must be real directories too, and the target a non-directory already unpacked
        let q = out;
        for (const c of tparts.slice(0, -1)) {
          q = join(q, c);
          if (!lstatSync(q, { throwIfNoEntry: false })?.isDirectory()) throw new ExtractError(`hard link ${JSON.stringify(raw.slice(0, 200))} points through a non-directory`);
        }
        const st = tparts.length > 0 ? lstatSync(target, { throwIfNoEntry: false }) : undefined;
        if (!st || st.isDirectory()) throw new ExtractError(`hard link ${JSON.stringify(raw.slice(0, 200))} points at ${JSON.stringify((entry.linkpath ?? "").slice(0, 200))}, which is not a file earlier in the archive`);
        clear(p, false);
        linkSync(target, p); // link(2) does not follow a symlink target: it links the symlink itself
        entry.resume();
      } else {
        throw new ExtractError(`entry ${JSON.stringify(raw.slice(0, 200))} is a ${entry.type}: only files, directories and links are accepted`);
      }
    } catch (err) {
      entry.resume();
      fail(err as Error);
    }
  };

  let finish: () => void = () => undefined;
  function fail(err: Error) {
    if (failed) return;
    failed = err instanceof ExtractError ? err : new ExtractError(`the archive could not be unpacked: ${(err as NodeJS.ErrnoException).code ?? err.message}`);
    // stop reading (a gzip bomb is not inflated further) and close every file being written
    src.destroy();
    for (const ws of open) ws.destroy();
    finish();
  }

  parser.on("entry", onEntry);
  await new Promise<void>((resolve) => {
    finish = resolve;
    parser.on("error", (err: Error) => fail(new ExtractError(err.message, true)));
    parser.on("warn", (code: string, message: string | Error) => {
      if (code === "TAR_ENTRY_INFO") return;
      const text = typeof message === "string" ? message : message.message;
      if (code === "TAR_ABORT" && /decompression ratio/.test(text)) return fail(new ExtractError(`the archive inflates more than ${RATIO}-fold (a compression bomb)`));
      fail(new ExtractError(typeof message === "string" ? message : message.message, true));
    });
    src.on("error", (err) => fail(err));
    parser.on("end", () => resolve());
    src.pipe(parser);
  });
  await Promise.all(writes);
  if (failed) throw failed;
  return { bytes, entries };
}

/** Removes a directory tree left by a failed extraction (no mounts can be below it). */
export function removeExtracted(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

import { constants, readFileSync } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { join } from "node:path";

/**
 * Where a sandbox's console output (PID 1's and envd's stdout and stderr) is written: on the
 * sandbox's own disk, beside the overlay's upper layer and out of the sandbox's sight. A sandbox
 * that floods it (root inside can reach envd's descriptors) fills its own disk, never the host's.
 */
export function consolePath(sandboxDir: string): string {
  return join(sandboxDir, "disk", "console.log");
}

/** Where sandboxes made before the console moved to their disk have it. */
function legacyConsolePath(sandboxDir: string): string {
  return join(sandboxDir, "console.log");
}

/**
 * The last `maxBytes` of a sandbox's console output (fewer when there is less; an empty buffer
 * when there is none). Opened without following links, and only a regular file is read.
 */
export async function readConsoleTail(sandboxDir: string, maxBytes: number): Promise<Buffer> {
  for (const file of [consolePath(sandboxDir), legacyConsolePath(sandboxDir)]) {
    let fh: FileHandle;
    try {
      fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch {
      continue;
    }
    try {
      const st = await fh.stat();
      if (!st.isFile()) return Buffer.alloc(0);
      const len = Math.min(st.size, maxBytes);
      const buf = Buffer.alloc(len);
      let got = 0;
      while (got < len) {
        const { bytesRead } = await fh.read(buf, got, len - got, st.size - len + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return buf.subarray(0, got);
    } finally {
      await fh.close();
    }
  }
  return Buffer.alloc(0);
}

/** The last lines of a sandbox's console output, for error messages. */
export function consoleText(sandboxDir: string): string {
  for (const file of [consolePath(sandboxDir), legacyConsolePath(sandboxDir)]) {
    try {
      return readFileSync(file, "utf8").slice(-3000).trim() || "(no output)";
    } catch {
      // not there: the other place, or no output at all
    }
  }
  return "(no output)";
}

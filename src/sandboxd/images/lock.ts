import { closeSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";

/** Whether a process with this pid exists on the host. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Takes an exclusive lock file holding our pid, waiting while another live process holds it; a
 * lock left by a dead process is taken over. Resolves with the release function.
 */
export async function takeLock(file: string, opts: { timeoutMs: number; onWait?: () => void }): Promise<() => void> {
  const t0 = Date.now();
  let told = false;
  for (;;) {
    try {
      const fd = openSync(file, "wx", 0o644);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(file, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    let holder = 0;
    try {
      holder = Number(readFileSync(file, "utf8").trim());
    } catch {
      continue; // released between our open and read
    }
    if (holder > 0 && !alive(holder)) {
      rmSync(file, { force: true });
      continue;
    }
    if (!told) {
      opts.onWait?.();
      told = true;
    }
    if (Date.now() - t0 > opts.timeoutMs) throw new Error(`timed out waiting for ${file} (held by pid ${holder})`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

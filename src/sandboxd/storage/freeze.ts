// Quiescing a mounted file system for the instant of a consistent copy of its image: fsfreeze
// from util-linux (the kernel flushes it and blocks new writes until thawed), and syncfs.
import { execTool, mustExec } from "../host/exec.js";

/**
 * Writes the dirty data and metadata of the file system at `mountpoint` and commits its journal
 * (`sync -f`: syncfs). Done while the sandbox still runs, it leaves little for the freeze to flush.
 */
export async function syncFs(mountpoint: string): Promise<void> {
  await mustExec("sync", ["--file-system", mountpoint]);
}

/** Freezes the file system mounted at `mountpoint`: dirty data is written and further writes block until thawFs. */
export async function freezeFs(mountpoint: string): Promise<void> {
  await mustExec("fsfreeze", ["--freeze", mountpoint]);
}

/** Thaws the file system at `mountpoint`; one that is not frozen is left as it is (so a restart may thaw every disk blindly). */
export async function thawFs(mountpoint: string): Promise<void> {
  const r = await execTool("fsfreeze", ["--unfreeze", mountpoint]);
  // the kernel answers EINVAL for a file system that is not frozen
  if (r.code !== 0 && !/Invalid argument/i.test(r.stderr)) throw new Error(`fsfreeze --unfreeze ${mountpoint} failed: ${r.stderr.trim().slice(-500)}`);
}

/** Runs `fn` while the file system at `mountpoint` is frozen, and always thaws it after, whether `fn` succeeded or not. */
export async function withFrozenFs<T>(mountpoint: string, fn: () => Promise<T>): Promise<T> {
  await freezeFs(mountpoint);
  try {
    return await fn();
  } finally {
    await thawFs(mountpoint);
  }
}
